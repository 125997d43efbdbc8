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

  // Drawings: fitted to the page width on load; buttons, drag to pan, Ctrl + wheel to zoom.
  document.querySelectorAll("[data-viewer]").forEach(function (viewer) {
    var box = viewer.querySelector(".drawing");
    var svg = box && box.querySelector("svg");
    if (!svg || !svg.viewBox || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) return;
    // dot writes sizes in points: 4/3 px each
    var naturalWidth = svg.viewBox.baseVal.width * 4 / 3, naturalHeight = svg.viewBox.baseVal.height * 4 / 3;
    var scale = 1;
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    function apply(next, anchorX, anchorY) {
      var x = (box.scrollLeft + anchorX) / scale, y = (box.scrollTop + anchorY) / scale;
      scale = Math.min(8, Math.max(0.02, next));
      svg.style.width = naturalWidth * scale + "px";
      svg.style.height = naturalHeight * scale + "px";
      box.scrollLeft = x * scale - anchorX;
      box.scrollTop = y * scale - anchorY;
    }
    function fit() {
      var room = box.clientWidth - 16;
      apply(room > 0 ? Math.min(1, room / naturalWidth) : 1, 0, 0);
    }
    fit();
    viewer.querySelectorAll("[data-zoom]").forEach(function (button) {
      button.addEventListener("click", function () {
        var how = button.getAttribute("data-zoom");
        var middleX = box.clientWidth / 2, middleY = box.clientHeight / 2;
        if (how === "fit") fit();
        else if (how === "actual") apply(1, middleX, middleY);
        else apply(scale * (how === "in" ? 1.25 : 0.8), middleX, middleY);
      });
    });
    box.addEventListener("wheel", function (event) {
      if (!event.ctrlKey && !event.metaKey) return;
      event.preventDefault();
      var rect = box.getBoundingClientRect();
      apply(scale * (event.deltaY < 0 ? 1.15 : 1 / 1.15), event.clientX - rect.left, event.clientY - rect.top);
    }, { passive: false });
    var drag = null;
    box.addEventListener("mousedown", function (event) {
      if (event.button !== 0 || event.target.closest("a")) return;
      drag = { x: event.clientX, y: event.clientY, left: box.scrollLeft, top: box.scrollTop };
      box.classList.add("dragging");
      event.preventDefault();
    });
    window.addEventListener("mousemove", function (event) {
      if (!drag) return;
      box.scrollLeft = drag.left - (event.clientX - drag.x);
      box.scrollTop = drag.top - (event.clientY - drag.y);
    });
    window.addEventListener("mouseup", function () {
      drag = null;
      box.classList.remove("dragging");
    });
    var open = viewer.querySelector("[data-open-svg]");
    if (open) open.addEventListener("click", function () {
      var copy = svg.cloneNode(true);
      copy.style.width = naturalWidth + "px";
      copy.style.height = naturalHeight + "px";
      var blob = new Blob([new XMLSerializer().serializeToString(copy)], { type: "image/svg+xml" });
      window.open(URL.createObjectURL(blob), "_blank");
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
    else if (target.parentNode && target.parentNode.classList.contains("lines")) target.classList.add("line-target");
    target.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", revealTarget);
  revealTarget();
})();
