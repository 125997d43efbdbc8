// The compiler-stages page: the kernel's Python, PTX and SASS panes, linked by Triton's line info.
// The map arrives as one JSON block (#st-data, written by report/stages_view.py):
//   lines: [{l: Python line, ptx: [[first, last], ...], sass: [[first, last], ...]}]
// A click on a linked line in any pane selects its Python line: that line and all its PTX and SASS ranges are
// marked and scrolled to. Lines are indexed once on load; a click clears only what it marked (linked_panes.js).
(function () {
  "use strict";
  var source = document.getElementById("st-data");
  var status = document.getElementById("st-status");
  if (!source || !status) return;
  var data = JSON.parse(source.textContent);
  var PANES = ["py", "ptx", "sass"];
  var owner = { py: {}, ptx: {}, sass: {} };  // line -> index into data.lines
  var line = LinkedPanes.line, mark = LinkedPanes.mark, clear = LinkedPanes.clear, reveal = LinkedPanes.reveal;

  function ranges(entry, pane) { return pane === "py" ? [[entry.l, entry.l]] : entry[pane]; }

  data.lines.forEach(function (entry, i) {
    PANES.forEach(function (pane) {
      ranges(entry, pane).forEach(function (range) { LinkedPanes.own(owner, pane, range[0], range[1], i, true); });
    });
  });

  function count(list) {
    return list.reduce(function (sum, range) { return sum + range[1] - range[0] + 1; }, 0);
  }

  function select(index, clickedPane, clickedLine) {
    clear();
    var entry = data.lines[index];
    PANES.forEach(function (pane) {
      var first = null;
      ranges(entry, pane).forEach(function (range) {
        for (var n = range[0]; n <= range[1]; n++) {
          var element = mark(pane, n, n, pane === clickedPane && n === clickedLine ? "pv-sel" : "pv-hit");
          if (first === null) first = element;
        }
      });
      if (pane !== clickedPane || first === null) reveal(pane, pane === clickedPane ? line(pane, clickedLine) : first);
    });
    status.textContent = "Python line " + entry.l + ": " + count(entry.ptx) + " PTX lines in " + entry.ptx.length +
      " ranges, " + count(entry.sass) + " SASS lines in " + entry.sass.length + " ranges.";
    if (history.replaceState) history.replaceState(null, "", "#line=" + entry.l);
  }

  PANES.forEach(function (pane) {
    var box = document.querySelector('[data-scroll="' + pane + '"]');
    if (!box) return;
    box.addEventListener("click", function (event) {
      var number = LinkedPanes.clickedLine(event, box, pane);
      if (number === null) return;
      var index = owner[pane][number];
      if (index === undefined) {
        clear();
        status.textContent = "Line " + number + " of the " + pane.toUpperCase() + " carries no Python line.";
        return;
      }
      select(index, pane, number);
    });
  });

  var wanted = /line=(\d+)/.exec(location.hash);
  if (wanted && owner.py[+wanted[1]] !== undefined) {
    var index = owner.py[+wanted[1]];
    select(index, "py", +wanted[1]);
    reveal("py", line("py", +wanted[1]));
  }
})();
