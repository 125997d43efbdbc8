// The compile timeline: a tooltip for the span under the pointer, and zooming a chart (buttons, Ctrl + wheel).
(function () {
  "use strict";
  var tip = document.querySelector(".tl-tip");
  if (!tip) return;
  function place(event) {
    var x = event.clientX + 14, y = event.clientY + 16;
    if (x + tip.offsetWidth > window.innerWidth - 8) x = Math.max(8, event.clientX - tip.offsetWidth - 14);
    if (y + tip.offsetHeight > window.innerHeight - 8) y = Math.max(8, event.clientY - tip.offsetHeight - 16);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  document.querySelectorAll("[data-timeline]").forEach(function (chart) {
    var scroll = chart.querySelector(".tl-scroll"), canvas = chart.querySelector(".tl-canvas"), zoom = 1;
    chart.addEventListener("mouseover", function (event) {
      var target = event.target.closest("[data-tip]");
      tip.hidden = !target;
      if (target) { tip.textContent = target.getAttribute("data-tip"); place(event); }
    });
    chart.addEventListener("mousemove", function (event) { if (!tip.hidden) place(event); });
    chart.addEventListener("mouseleave", function () { tip.hidden = true; });
    function apply(next, anchor) {
      var at = (scroll.scrollLeft + anchor) / canvas.offsetWidth;
      zoom = Math.min(200, Math.max(1, next));
      canvas.style.width = zoom * 100 + "%";
      scroll.scrollLeft = at * canvas.offsetWidth - anchor;
    }
    chart.querySelectorAll("[data-tl-zoom]").forEach(function (button) {
      button.addEventListener("click", function () {
        var how = button.getAttribute("data-tl-zoom");
        apply(how === "fit" ? 1 : zoom * (how === "in" ? 2 : 0.5), scroll.clientWidth / 2);
      });
    });
    scroll.addEventListener("wheel", function (event) {
      if (!event.ctrlKey && !event.metaKey) return;
      event.preventDefault();
      apply(zoom * (event.deltaY < 0 ? 1.25 : 0.8), event.clientX - scroll.getBoundingClientRect().left);
    }, { passive: false });
  });
})();
