// The compiler-stages page: the kernel's Python, PTX and SASS panes, linked by Triton's line info.
// The map arrives as one JSON block (#st-data, written by report/stages_view.py):
//   lines: [{l: Python line, ptx: [[first, last], ...], sass: [[first, last], ...]}]
// A click on a linked line in any pane selects its Python line: that line and all its PTX and SASS ranges are
// marked and scrolled to. Lines are indexed once on load; a click clears only what it marked.
(function () {
  "use strict";
  var source = document.getElementById("st-data");
  var status = document.getElementById("st-status");
  if (!source || !status) return;
  var data = JSON.parse(source.textContent);
  var PANES = ["py", "ptx", "sass"];
  var owner = { py: {}, ptx: {}, sass: {} };  // line -> index into data.lines
  var marked = [];

  function line(pane, number) { return document.getElementById(pane + "-" + number); }
  function ranges(entry, pane) { return pane === "py" ? [[entry.l, entry.l]] : entry[pane]; }

  data.lines.forEach(function (entry, i) {
    PANES.forEach(function (pane) {
      ranges(entry, pane).forEach(function (range) {
        for (var n = range[0]; n <= range[1]; n++) {
          if (owner[pane][n] !== undefined) continue;
          owner[pane][n] = i;
          var element = line(pane, n);
          if (element) element.classList.add("pv-m");
        }
      });
    });
  });

  function clear() {
    marked.forEach(function (element) { element.classList.remove("pv-hit", "pv-sel"); });
    marked = [];
  }
  function reveal(pane, element) {
    var box = document.querySelector('[data-scroll="' + pane + '"]');
    if (!box || !element) return;
    var top = element.offsetTop;
    if (top < box.scrollTop || top > box.scrollTop + box.clientHeight - element.offsetHeight) {
      box.scrollTop = Math.max(0, top - box.clientHeight / 3);
    }
  }
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
          var element = line(pane, n);
          if (!element) continue;
          element.classList.add(pane === clickedPane && n === clickedLine ? "pv-sel" : "pv-hit");
          marked.push(element);
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
      var element = event.target.closest("span[id]");
      while (element && element.parentElement && element.parentElement.tagName !== "PRE") {
        element = element.parentElement.closest("span[id]");
      }
      if (!element) return;
      var number = parseInt(element.id.slice(pane.length + 1), 10);
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
