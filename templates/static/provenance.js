// The provenance page: three linked panes (pre-grad graph, post-grad graph, output code).
// The links arrive as one JSON block (#pv-data, written by report/provenance_view.py):
//   pre:  [{n: name, t: target, l: line, post: [post index]}]
//   post: [{n, t, l, pre: [pre index], code: [code index]}]
//   code: [{n: label, k: kind ("triton", "cpp", "extern", or "kernel" for a definition), h: debug handle,
//           p: launch position, l: line, r: [[first, last], ...] (the first range is the entry's own lines),
//           post: [post index], url}]
// Lines are indexed once on load (line -> entry, per pane); a click marks only the lines it concerns and
// clears only those it marked (linked_panes.js), so nothing scales with the size of the code but the first pass.
(function () {
  "use strict";
  var source = document.getElementById("pv-data");
  var status = document.getElementById("pv-status");
  if (!source || !status) return;
  var data = JSON.parse(source.textContent);
  var NAMES = { pre: "pre-grad", post: "post-grad", code: "output code" };
  var owner = { pre: {}, post: {}, code: {} };  // line -> index into data[pane]
  var stops = { pre: [], post: [], code: [] };  // the linked lines, in order, for the arrow keys
  var selected = null;  // {pane, line}
  var mark = LinkedPanes.mark, clear = LinkedPanes.clear, reveal = LinkedPanes.reveal;

  function own(pane, first, last, index, linked) {
    Array.prototype.push.apply(stops[pane], LinkedPanes.own(owner, pane, first, last, index, linked));
  }
  data.pre.forEach(function (node, i) { own("pre", node.l, node.l, i, node.post.length > 0); });
  data.post.forEach(function (node, i) { own("post", node.l, node.l, i, node.pre.length + node.code.length > 0); });
  data.code.forEach(function (entry, i) { own("code", entry.r[0][0], entry.r[0][1], i, entry.post.length > 0); });
  Object.keys(stops).forEach(function (pane) { stops[pane].sort(function (a, b) { return a - b; }); });

  function unique(list) {
    var seen = {}, out = [];
    list.forEach(function (x) { if (!seen[x]) { seen[x] = true; out.push(x); } });
    return out;
  }
  function flat(lists) { return unique([].concat.apply([], lists)); }

  // The status line, built from text, <code> and link parts (never as HTML).
  function say(parts) {
    status.textContent = "";
    parts.forEach(function (part) {
      if (typeof part === "string") { status.appendChild(document.createTextNode(part)); return; }
      var element = document.createElement(part.url ? "a" : "code");
      if (part.url) element.href = part.url;
      element.textContent = part.code || part.text;
      status.appendChild(element);
    });
  }
  function plural(count, word) { return count + " " + word + (count === 1 ? "" : "s"); }
  function names(list, key) {
    var shown = list.slice(0, 4).map(function (i) { return data[key][i].n; }).join(", ");
    return list.length > 4 ? shown + ", …" : shown;
  }
  function where(entry) {
    var own = entry.r[0];
    var text = own[0] === own[1] ? "line " + own[1] : "lines " + own[0] + "-" + own[1];
    var others = entry.r.slice(1).map(function (r) { return r[0] === r[1] ? String(r[0]) : r[0] + "-" + r[1]; });
    if (entry.k === "kernel") return text + (others.length ? ", launched at line " + others.join(", ") : ", never launched");
    return (entry.k === "extern" ? "library call, " : "launch #" + entry.p + ", ") + text +
      (others.length ? "; kernel lines " + others.join(", ") : "");
  }
  function codeParts(codes) {
    if (!codes.length) return [" · no launch"];
    var parts = [" · "];
    codes.slice(0, 3).forEach(function (c, i) {
      var entry = data.code[c];
      if (i) parts.push("; ");
      parts.push({ code: entry.n }, " (" + where(entry) + ")");
    });
    if (codes.length === 1) parts.push(" · ", { text: "its page", url: data.code[codes[0]].url });
    if (codes.length > 3) parts.push("; and " + (codes.length - 3) + " more");
    return parts;
  }

  function select(pane, number, keepScroll) {
    clear();
    selected = { pane: pane, line: number };
    var index = owner[pane][number];
    var clicked = mark(pane, number, number, "pv-sel");
    if (!keepScroll) reveal(pane, clicked, false);
    if (index === undefined) {
      say(["Line " + number + " of the " + NAMES[pane] + " pane has no counterpart."]);
      return;
    }
    var pres = [], posts = [], codes = [], parts = [];
    if (pane === "pre") {
      var node = data.pre[index];
      posts = node.post;
      codes = flat(posts.map(function (p) { return data.post[p].code; }));
      parts = [{ code: node.n }, " · " + node.t + " (pre-grad) → " + plural(posts.length, "post-grad node")];
      if (posts.length) parts.push(" (", { code: names(posts, "post") }, ")");
      parts = parts.concat(codeParts(codes));
    } else if (pane === "post") {
      var post = data.post[index];
      pres = post.pre;
      codes = post.code;
      parts = [{ code: post.n }, " · " + post.t + " (post-grad) → " + plural(pres.length, "pre-grad node")];
      if (pres.length) parts.push(" (", { code: names(pres, "pre") }, ")");
      parts = parts.concat(codeParts(codes));
    } else {
      var entry = data.code[index];
      posts = entry.post;
      pres = flat(posts.map(function (p) { return data.post[p].pre; }));
      entry.r.forEach(function (r, i) { mark("code", r[0], r[1], i === 0 ? "pv-sel" : "pv-hit"); });
      parts = [{ code: entry.n }, " (" + where(entry) + ") ← " + plural(posts.length, "post-grad node")];
      if (posts.length) parts.push(" (", { code: names(posts, "post") }, ")");
      parts.push(" ← " + plural(pres.length, "pre-grad node"));
      if (pres.length) parts.push(" (", { code: names(pres, "pre") }, ")");
      parts.push(" · ", { text: "its page", url: entry.url });
    }
    var firsts = {};
    function hit(target, first, last) {
      var top = mark(target, first, last, "pv-hit");
      if (top && (!firsts[target] || first < firsts[target].line)) firsts[target] = { line: first, element: top };
    }
    if (pane !== "pre") pres.forEach(function (i) { hit("pre", data.pre[i].l, data.pre[i].l); });
    if (pane !== "post") posts.forEach(function (i) { hit("post", data.post[i].l, data.post[i].l); });
    if (pane !== "code") codes.forEach(function (i) { data.code[i].r.forEach(function (r) { hit("code", r[0], r[1]); }); });
    Object.keys(firsts).forEach(function (target) { reveal(target, firsts[target].element, true); });
    say(parts);
  }

  document.querySelectorAll("[data-scroll]").forEach(function (box) {
    var pane = box.getAttribute("data-scroll");
    box.addEventListener("click", function (event) {
      var number = LinkedPanes.clickedLine(event, box, pane);
      if (number !== null && !isNaN(number)) select(pane, number, true);
    });
    box.addEventListener("keydown", function (event) {
      var down = event.key === "ArrowDown" || event.key === "j", up = event.key === "ArrowUp" || event.key === "k";
      if (event.key === "Escape") { clear(); selected = null; say(["Click a line in any pane."]); return; }
      if (!down && !up) return;
      var list = stops[pane];
      if (!list.length) return;
      var from = selected && selected.pane === pane ? selected.line : (down ? 0 : Infinity);
      var next = null;
      if (down) { for (var i = 0; i < list.length; i++) if (list[i] > from) { next = list[i]; break; } }
      else { for (var j = list.length - 1; j >= 0; j--) if (list[j] < from) { next = list[j]; break; } }
      if (next === null) return;
      event.preventDefault();
      select(pane, next, false);
    });
  });

  // A link may name what to select: #post=addmm, #pre=linear, #launch=3, #kernel=triton_poi_fused_gelu_0
  function fromHash() {
    var match = /^#(pre|post|launch|kernel)=(.+)$/.exec(location.hash);
    if (!match) return;
    var wanted = decodeURIComponent(match[2]), found = null;
    if (match[1] === "pre" || match[1] === "post") {
      data[match[1]].forEach(function (node) { if (found === null && node.n === wanted) found = [match[1], node.l]; });
    } else {
      data.code.forEach(function (entry) {
        var kernel = entry.k === "kernel";
        if (found === null && (match[1] === "kernel" ? kernel && entry.n === wanted : !kernel && String(entry.p) === wanted)) {
          found = ["code", entry.r[0][1]];
        }
      });
    }
    if (found) select(found[0], found[1], false);
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
