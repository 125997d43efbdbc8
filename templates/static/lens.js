// inductor-lens report behaviour: sortable tables, filters, and opening the code block a link points into.
(function () {
  "use strict";

  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) return numeric ? -Infinity : "";
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    var number = parseFloat(raw);
    return isNaN(number) ? -Infinity : number;
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    var headers = table.querySelectorAll("th[data-sort]");
    headers.forEach(function (th) {
      th.addEventListener("click", function () {
        var index = Array.prototype.indexOf.call(th.parentNode.children, th);
        var numeric = th.getAttribute("data-sort") === "number";
        var ascending = !th.classList.contains("sorted-asc");
        headers.forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
          return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });

  document.querySelectorAll("input[data-filter-table]").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-filter-table"));
    if (!table) return;
    input.addEventListener("input", function () {
      var needle = input.value.trim().toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        row.hidden = needle !== "" && row.textContent.toLowerCase().indexOf(needle) === -1;
      });
    });
  });

  document.querySelectorAll("input[data-filter-lines]").forEach(function (input) {
    var block = document.getElementById(input.getAttribute("data-filter-lines"));
    if (!block) return;
    input.addEventListener("input", function () {
      var needle = input.value.trim().toLowerCase();
      Array.prototype.forEach.call(block.children, function (line) {
        line.hidden = needle !== "" && line.textContent.toLowerCase().indexOf(needle) === -1;
      });
    });
  });

  // A link to a line (#code-42) may point into a closed <details>: open it and mark the line.
  function revealTarget() {
    if (!location.hash) return;
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    for (var node = target.parentNode; node; node = node.parentNode) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    document.querySelectorAll(".line-target").forEach(function (el) { el.classList.remove("line-target"); });
    if (target.tagName === "A" && target.parentNode) target.parentNode.classList.add("line-target");
    target.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", revealTarget);
  revealTarget();
})();
