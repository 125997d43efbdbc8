// Linked panes: what the compiler-stages page (stages.js) and the provenance page (provenance.js) share.
// A pane is a scroll box (data-scroll="<pane>") around a <pre class="lines"> of one <span id="<pane>-<n>"> a
// line. A linked line is marked .pv-m once, on load; a selection marks lines .pv-sel / .pv-hit and remembers
// them, so that clearing it costs only what it marked.
var LinkedPanes = (function () {
  "use strict";
  var marked = [];

  function line(pane, number) { return document.getElementById(pane + "-" + number); }

  // Lines first..last of a pane go to entry `index` where no earlier entry took them (owner[pane]: line ->
  // index); a linked one is marked .pv-m. Returns the linked lines it took.
  function own(owner, pane, first, last, index, linked) {
    var taken = [];
    for (var number = first; number <= last; number++) {
      if (owner[pane][number] !== undefined) continue;
      owner[pane][number] = index;
      if (!linked) continue;
      var element = line(pane, number);
      if (element) element.classList.add("pv-m");
      taken.push(number);
    }
    return taken;
  }

  // Marks lines first..last of a pane with the class `how`; returns the first line's element, or null.
  function mark(pane, first, last, how) {
    var top = null;
    for (var number = first; number <= last; number++) {
      var element = line(pane, number);
      if (!element) continue;
      element.classList.add(how);
      marked.push(element);
      if (top === null) top = element;
    }
    return top;
  }

  function clear() {
    marked.forEach(function (element) { element.classList.remove("pv-hit", "pv-sel"); });
    marked = [];
  }

  // Scrolls the pane to a third above the element, where it is out of view (or `always`).
  function reveal(pane, element, always) {
    var box = document.querySelector('[data-scroll="' + pane + '"]');
    if (!box || !element) return;
    var top = element.offsetTop;
    if (always || top < box.scrollTop || top > box.scrollTop + box.clientHeight - element.offsetHeight) {
      box.scrollTop = Math.max(0, top - box.clientHeight / 3);
    }
  }

  // The number of the line a click in a pane's box fell on (NaN for a line element without one), or null.
  function clickedLine(event, box, pane) {
    var element = event.target.closest ? event.target.closest("pre.lines > span[id]") : null;
    if (!element || !box.contains(element)) return null;
    return parseInt(element.id.slice(pane.length + 1), 10);
  }

  return { line: line, own: own, mark: mark, clear: clear, reveal: reveal, clickedLine: clickedLine };
})();
