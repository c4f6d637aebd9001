/* radt-ext's report renderer: draws the plotly figures the report holds as plain SVG.
   Only what the reports use: line, marker and text scatter (stacked too), bars, heatmaps, subplots,
   shapes, annotations; a value shows when the pointer rests on a point. No network, no eval: it
   runs in a browser offline and in the MLflow UI's sandboxed artifact viewer alike. */
(function () {
  if (window.Plotly) return;
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = ["#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff", "#fecb52"];
  function el(parent, tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    parent.appendChild(e);
    return e;
  }
  function txt(t) { return t === undefined || t === null ? "" : (typeof t === "object" ? (t.text || "") : String(t)); }
  function plain(s) { return txt(s).replace(/<br\s*\/?>/g, " ").replace(/<[^>]+>/g, ""); }
  function fmt(v) { return typeof v === "number" ? (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : +v.toPrecision(4) + "") : String(v); }
  function ticks(lo, hi, n) {
    if (!(hi > lo)) { hi = lo + 1; }
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n))), err = (hi - lo) / n / step;
    step *= err >= 5 ? 10 : err >= 2 ? 5 : err >= 1 ? 2 : 1;
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }
  function axisKey(ref, letter) { return letter + "axis" + (ref && ref.length > 1 ? ref.slice(1) : ""); }
  function heatColor(f) {  // green (low) → yellow → red (high), as RdYlGn reversed
    f = Math.max(0, Math.min(1, f));
    var a = f < 0.5 ? [26, 152, 80] : [254, 224, 139], b = f < 0.5 ? [254, 224, 139] : [215, 48, 39], g = f < 0.5 ? f * 2 : f * 2 - 1;
    return "rgb(" + [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * g); }).join(",") + ")";
  }

  function newPlot(id, data, layout, config) {
    var div = typeof id === "string" ? document.getElementById(id) : id;
    if (!div) return;
    layout = layout || {};
    var W = div.clientWidth || 1200, H = layout.height || 450;
    var m = layout.margin || {}, ml = m.l !== undefined ? m.l : 70, mr = m.r !== undefined ? m.r : 20,
        mt = m.t !== undefined ? m.t : 80, mb = m.b !== undefined ? m.b : 50;
    var pw = Math.max(50, W - ml - mr), ph = Math.max(50, H - mt - mb);
    var svg = el(div, "svg", {width: W, height: H, "class": "radt-plot", "font-family": "system-ui,sans-serif", "font-size": 11});
    if (txt(layout.title)) el(svg, "text", {x: ml, y: 24, "font-size": 16}, plain(layout.title));

    // axes: range from the traces that use them (categories for text values)
    var axes = {};
    function axis(key) {
      if (!axes[key]) {
        var spec = layout[key] || {};
        axes[key] = {spec: spec, domain: spec.domain || [0, 1], lo: Infinity, hi: -Infinity, cats: [], letter: key[0]};
      }
      return axes[key];
    }
    function extend(ax, values) {
      (values || []).forEach(function (v) {
        if (v === null || v === undefined) return;
        if (typeof v === "number") { ax.lo = Math.min(ax.lo, v); ax.hi = Math.max(ax.hi, v); }
        else if (ax.cats.indexOf(String(v)) < 0) ax.cats.push(String(v));
      });
    }
    var stacks = {};
    data.forEach(function (t, i) {
      t._color = (t.line && t.line.color) || (typeof (t.marker || {}).color === "string" && t.marker.color) || t.marker_color || COLORS[i % COLORS.length];
      var xa = axis(axisKey(t.xaxis, "x")), ya = axis(axisKey(t.yaxis, "y"));
      t._xa = xa; t._ya = ya;
      var ys = t.y || [];
      if (t.stackgroup) {  // cumulative over the earlier traces of the group, by point index
        var base = stacks[t.stackgroup] || [];
        ys = ys.map(function (v, j) { return (base[j] || 0) + (v || 0); });
        t._base = base; stacks[t.stackgroup] = ys; extend(ya, [0]);
      }
      t._y = ys;
      if (t.type === "heatmap") { extend(xa, t.x); extend(ya, t.y); return; }
      if (t.type === "bar") {
        var vals = t.orientation === "h" ? t.x : t.y, cats = t.orientation === "h" ? t.y : t.x;
        extend(t.orientation === "h" ? ya : xa, cats);
        var va = t.orientation === "h" ? xa : ya;
        extend(va, [0]);
        if (layout.barmode === "stack") {
          var key = "bar" + (t.orientation === "h" ? t.yaxis : t.xaxis), acc = stacks[key] || {};
          t._base = (vals || []).map(function (v, j) { return acc[cats[j]] || 0; });
          (vals || []).forEach(function (v, j) { acc[cats[j]] = (acc[cats[j]] || 0) + (v || 0); extend(va, [acc[cats[j]]]); });
          stacks[key] = acc;
        } else extend(va, vals);
        return;
      }
      extend(xa, t.x); extend(ya, ys);
    });
    (layout.shapes || []).forEach(function (s) {
      if (s.xref && s.xref !== "paper") extend(axis(axisKey(s.xref.split(" ")[0], "x")), [s.x0, s.x1]);
    });
    Object.keys(layout).forEach(function (k) { if (/^[xy]axis\d*$/.test(k)) axis(k); });
    var bars = data.filter(function (t) { return t.type === "bar"; });

    function scale(ax, v, side) {
      var a = ax.letter === "x" ? ml + ax.domain[0] * pw : mt + (1 - ax.domain[1]) * ph;
      var len = (ax.domain[1] - ax.domain[0]) * (ax.letter === "x" ? pw : ph);
      if (ax.cats.length && typeof v !== "number") {
        var i = ax.cats.indexOf(String(v)), band = len / ax.cats.length;
        var pos = (i + 0.5 + (side || 0)) * band;
        return ax.letter === "x" ? a + pos : a + pos;
      }
      var lo = ax.lo, hi = ax.hi;
      if (!(hi > lo)) { lo = lo === Infinity ? 0 : lo - 0.5; hi = lo + 1; }
      var f = (v - lo) / (hi - lo);
      return ax.letter === "x" ? a + f * len : a + (1 - f) * len;
    }
    function band(ax) { return (ax.domain[1] - ax.domain[0]) * (ax.letter === "x" ? pw : ph) / Math.max(1, ax.cats.length); }
    function paperX(x) { return ml + x * pw; }
    function paperY(y) { return mt + (1 - y) * ph; }

    // shared axes (make_subplots(shared_xaxes=True): "matches") show one range
    [0, 1].forEach(function (pass) {
      Object.keys(axes).forEach(function (k) {
        var ax = axes[k], to = ax.spec.matches ? axes[axisKey(ax.spec.matches, ax.letter)] : null;
        if (!to || to === ax) return;
        if (pass === 0) { to.lo = Math.min(to.lo, ax.lo); to.hi = Math.max(to.hi, ax.hi); }
        else { ax.lo = to.lo; ax.hi = to.hi; }
      });
    });

    // axes with ticks and titles
    Object.keys(axes).forEach(function (k) {
      var ax = axes[k];
      if (ax.lo === Infinity && !ax.cats.length) return;
      if (!ax.cats.length && ax.hi - ax.lo > 0) { var pad = ax.letter === "y" ? (ax.hi - ax.lo) * 0.05 : 0; ax.lo -= pad; ax.hi += pad; }
      var other = ax.letter === "x" ? axes[axisKey(ax.spec.anchor || "y" + k.slice(5), "y")] : axes[axisKey(ax.spec.anchor || "x" + k.slice(5), "x")];
      var odom = other ? other.domain : [0, 1];
      var g = el(svg, "g", {"class": "radt-axis " + k, stroke: "#444"});
      var labels = ax.cats.length ? ax.cats : ticks(ax.lo, ax.hi, ax.letter === "x" ? 8 : 4);
      if (ax.letter === "x") {
        var y0 = paperY(odom[0]);
        el(g, "line", {x1: paperX(ax.domain[0]), x2: paperX(ax.domain[1]), y1: y0, y2: y0});
        labels.forEach(function (v) {
          var x = scale(ax, v);
          el(g, "line", {x1: x, x2: x, y1: paperY(odom[0]), y2: paperY(odom[1]), stroke: "#eee"});
          el(g, "text", {x: x, y: y0 + 14, "text-anchor": "middle", stroke: "none", fill: "#444"}, fmt(v));
        });
        if (txt(ax.spec.title)) el(g, "text", {x: paperX((ax.domain[0] + ax.domain[1]) / 2), y: y0 + 30, "text-anchor": "middle", stroke: "none", fill: "#222"}, plain(ax.spec.title));
      } else {
        var x0 = paperX(odom[0]);
        el(g, "line", {x1: x0, x2: x0, y1: paperY(ax.domain[0]), y2: paperY(ax.domain[1])});
        labels.forEach(function (v) {
          var y = scale(ax, v);
          if (!ax.cats.length) el(g, "line", {x1: paperX(odom[0]), x2: paperX(odom[1]), y1: y, y2: y, stroke: "#eee"});
          el(g, "text", {x: x0 - 4, y: y + 4, "text-anchor": "end", stroke: "none", fill: "#444"}, fmt(v));
        });
        if (txt(ax.spec.title)) {
          var cy = paperY((ax.domain[0] + ax.domain[1]) / 2);
          el(g, "text", {x: x0 - ml + 14, y: cy, transform: "rotate(-90 " + (x0 - ml + 14) + " " + cy + ")", "text-anchor": "middle", stroke: "none", fill: "#222"}, plain(ax.spec.title));
        }
      }
    });

    // shapes (epoch spans, phase lines) under the data
    (layout.shapes || []).forEach(function (s) {
      var xa = s.xref && s.xref !== "paper" ? axes[axisKey(s.xref.split(" ")[0], "x")] : null;
      var yref = (s.yref || "paper").split(" ")[0], ya = yref !== "paper" ? axes[axisKey(yref, "y")] : null;
      var ydom = ya ? ya.domain : [0, 1];
      var X = function (v) { return xa ? scale(xa, v) : paperX(v); };
      var Y = function (v) { return (s.yref || "").indexOf("domain") >= 0 || !ya ? paperY(ydom[0] + v * (ydom[1] - ydom[0])) : scale(ya, v); };
      var line = s.line || {};
      if (s.type === "rect") {
        var xs = [X(s.x0), X(s.x1)], ys = [Y(s.y0), Y(s.y1)];
        el(svg, "rect", {x: Math.min.apply(null, xs), y: Math.min.apply(null, ys), width: Math.abs(xs[1] - xs[0]), height: Math.abs(ys[1] - ys[0]),
                         fill: s.fillcolor || "#888", "fill-opacity": s.opacity !== undefined ? s.opacity : 0.2, stroke: "none"});
      } else if (s.type === "line") {
        el(svg, "line", {x1: X(s.x0), x2: X(s.x1), y1: Y(s.y0), y2: Y(s.y1), stroke: line.color || "#888", "stroke-width": line.width || 1,
                         "stroke-dasharray": line.dash === "dot" ? "2,3" : line.dash === "dash" ? "6,4" : null});
      }
    });

    // traces
    data.forEach(function (t, ti) {
      var g = el(svg, "g", {"class": "radt-trace trace"}), xa = t._xa, ya = t._ya, color = t._color;
      var name = t.name || "";
      if (t.type === "heatmap") {
        var z = t.z || [], flat = [].concat.apply([], z).filter(function (v) { return typeof v === "number"; });
        var lo = t.zmin !== undefined ? t.zmin : Math.min.apply(null, flat), hi = t.zmax !== undefined ? t.zmax : Math.max.apply(null, flat);
        z.forEach(function (row, r) {
          row.forEach(function (v, c) {
            if (typeof v !== "number") return;
            var cx = scale(xa, t.x[c]), cy = scale(ya, t.y[r]), bw = band(xa), bh = band(ya);
            var cell = el(g, "rect", {x: cx - bw / 2, y: cy - bh / 2, width: bw, height: bh, fill: heatColor(hi > lo ? (v - lo) / (hi - lo) : 0.5), stroke: "#fff"});
            el(cell, "title", {}, t.y[r] + ", " + t.x[c] + ": " + fmt(v));
            var label = t.text && t.text[r] ? t.text[r][c] : fmt(v);
            el(g, "text", {x: cx, y: cy + 4, "text-anchor": "middle"}, label);
          });
        });
        return;
      }
      if (t.type === "bar") {
        var h = t.orientation === "h", cats = h ? t.y : t.x, vals = h ? t.x : t.y, cax = h ? ya : xa, vax = h ? xa : ya;
        var group = layout.barmode === "stack" ? [t] : bars.filter(function (b) { return b._xa === xa && b._ya === ya; });
        var k = group.indexOf(t), n = group.length, w = band(cax) * 0.8 / n;
        (cats || []).forEach(function (c, j) {
          var v = vals[j];
          if (typeof v !== "number") return;
          var base = t._base ? t._base[j] : 0, mid = scale(cax, c) - band(cax) * 0.4 + w * (k + 0.5);
          var a = scale(vax, base), b = scale(vax, base + v);
          var r = h ? el(g, "rect", {x: Math.min(a, b), y: mid - w / 2, width: Math.abs(b - a), height: w, fill: color})
                    : el(g, "rect", {x: mid - w / 2, y: Math.min(a, b), width: w, height: Math.abs(b - a), fill: color});
          el(r, "title", {}, (name ? name + " · " : "") + c + ": " + fmt(v));
        });
        return;
      }
      var mode = t.mode || "lines", xs = t.x || [], ys = t._y, pts = [];
      for (var i = 0; i < xs.length; i++) if (typeof ys[i] === "number" && xs[i] !== null) pts.push([scale(xa, xs[i]), scale(ya, ys[i])]);
      if (t.stackgroup && pts.length) {
        var lower = [];
        for (var j = xs.length - 1; j >= 0; j--) lower.push([scale(xa, xs[j]), scale(ya, t._base[j] || 0)]);
        el(g, "polygon", {points: pts.concat(lower).map(function (p) { return p[0].toFixed(1) + "," + p[1].toFixed(1); }).join(" "),
                          fill: color, "fill-opacity": 0.5, stroke: "none"});
      }
      if (mode.indexOf("lines") >= 0 && pts.length) {
        el(g, "polyline", {points: pts.map(function (p) { return p[0].toFixed(1) + "," + p[1].toFixed(1); }).join(" "), fill: "none", stroke: color,
                           "stroke-width": (t.line && t.line.width) || 1.5, "stroke-dasharray": t.line && t.line.dash === "dash" ? "6,4" : null});
      }
      var marks = mode.indexOf("markers") >= 0, texts = mode.indexOf("text") >= 0;
      if (marks || texts || mode.indexOf("lines") >= 0) {
        var every = marks || texts ? 1 : Math.max(1, Math.ceil(pts.length / 150));  // hover targets along a line
        for (var q = 0; q < xs.length; q += every) {
          if (typeof ys[q] !== "number") continue;
          var px = scale(xa, xs[q]), py = scale(ya, ys[q]), label = Array.isArray(t.text) ? t.text[q] : t.text;
          var dot = el(g, "circle", {cx: px, cy: py, r: marks ? ((t.marker || {}).size || 8) / 2 : 3, fill: marks ? color : "transparent",
                                     stroke: marks && (t.marker || {}).symbol === "circle-open" ? color : "none", "fill-opacity": marks && (t.marker || {}).symbol === "circle-open" ? 0 : 1});
          el(dot, "title", {}, (label ? plain(label) + " · " : name ? name + " · " : "") + fmt(xs[q]) + ", " + fmt(ys[q]));
          if (texts && label) el(g, "text", {x: px, y: py - 8, "text-anchor": "middle", fill: "#333"}, plain(label));
        }
      }
    });

    // annotations (subplot titles)
    (layout.annotations || []).forEach(function (a) {
      var x = a.xref === "paper" || !a.xref ? paperX(a.x) : scale(axes[axisKey(a.xref, "x")], a.x);
      var y = a.yref === "paper" || !a.yref ? paperY(a.y) : scale(axes[axisKey(a.yref, "y")], a.y);
      el(svg, "text", {x: x, y: y - 4, "text-anchor": a.xanchor === "left" ? "start" : a.xanchor === "right" ? "end" : "middle", "font-size": 13}, plain(a.text));
    });

    // legend: one entry per named trace shown in it
    var legend = document.createElement("div");
    legend.className = "radt-legend";
    data.forEach(function (t) {
      if (!t.name || t.showlegend === false || t.type === "heatmap") return;
      var item = document.createElement("span");
      item.innerHTML = '<svg width="18" height="10"><rect width="18" height="10" fill="' + t._color + '"></rect></svg> ';
      item.appendChild(document.createTextNode(t.name));
      legend.appendChild(item);
    });
    if (legend.childNodes.length) div.appendChild(legend);
  }
  window.Plotly = {newPlot: newPlot};
})();
