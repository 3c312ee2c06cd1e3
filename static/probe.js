/* The equivariance probe (page section 6): sliders rotate, scale and shear what the network saw; POST /probe runs
 * the network on each transform, and a plot sweeps one transform over its range. The page passes its shared state,
 * a request channel factory and how it shows a PNG.
 */
import { showLengths } from "./routing.js";

// End labels at their lines' last values, moved apart just enough to be read (`gap` px between centres) and kept
// within top..bottom: lines that end close together stacked their labels over each other.
export function spread(labels, top, bottom, gap) {
  var out = labels.slice().sort(function (a, b) { return a.y - b.y; });
  out.forEach(function (l, i) { l.y = Math.max(l.y, top + 4, i ? out[i - 1].y + gap : -Infinity); });
  for (var i = out.length - 1; i >= 0; i--) out[i].y = Math.min(out[i].y, i < out.length - 1 ? out[i + 1].y - gap : bottom - 4);
  return out;
}

export function createProbe(page) {
  var state = page.state, CFG = page.cfg, channel = page.channel, setImage = page.setImage;
  function $(id) { return document.getElementById(id); }


  // The sliders transform what the network saw (the 28x28 input of the last answer); POST /probe runs the network on it.
  // Moving one asks for that one transform (live) and, once it settles, a sweep of its whole range for the plot.
  var AXES = {
    rotate: { name: "rotation", unit: "\u00b0", lo: -45, hi: 45 },
    scale: { name: "scale", unit: "\u00d7", lo: 0.6, hi: 1.4 },
    shear: { name: "shear", unit: "\u00b0", lo: -30, hi: 30 }
  };
  var SWEEP_STEPS = 13, SWEEP_DELAY_MS = 200;
  var probeSliders = {};
  Object.keys(AXES).forEach(function (a) { probeSliders[a] = { input: $("transform-" + a), out: $("transform-" + a + "-out") }; });
  var probe = { input: $("probe-input"), verdict: $("probe-verdict"), bars: $("probe-lengths"), axis: $("probe-axis"),
                plot: $("probe-plot"), summary: $("probe-summary"), reset: $("probe-reset") };
  var sweep = null, sweepTimer = null;

  function fmtAxis(a, v) { return a === "scale" ? "\u00d7" + v.toFixed(2) : (v > 0 ? "+" : v < 0 ? "\u2212" : "") + Math.abs(v) + "\u00b0"; }

  function transformNow() {
    var t = {};
    Object.keys(AXES).forEach(function (a) { t[a] = parseFloat(probeSliders[a].input.value); });
    return t;
  }

  function probeBody(transforms) { return { pixels: state.result.input.pixels, transforms: transforms }; }

  var probeChannel = channel(function (data) {
    var res = data.results[0], k = state.selected === null ? res.prediction : state.selected;
    setImage(probe.input, res.input.png);
    var base = state.result.lengths[k];
    probe.verdict.textContent = "Reads " + res.prediction + " \u00b7 capsule " + k + " length " + res.lengths[k].toFixed(2) +
      " (" + base.toFixed(2) + " untransformed)";
    showLengths(probe.bars, res.lengths);
  }, function (err) { probe.verdict.textContent = "Probe failed: " + err.message; });

  var sweepChannel = channel(function (data, req) {
    sweep = { axis: req.axis, values: req.values, results: data.results };
    drawProbePlot();
  }, function (err) { probe.summary.textContent = "Sweep failed: " + err.message; });

  function probeLive() {
    if (!state.result) return;
    probeChannel.ask(function () { return state.result ? { path: "/probe", body: probeBody([transformNow()]) } : null; });
  }

  function scheduleSweep() {
    if (sweepTimer) clearTimeout(sweepTimer);
    sweepTimer = setTimeout(function () {
      sweepTimer = null;
      if (!state.result) return;
      sweepChannel.ask(function () {
        if (!state.result) return null;
        var axis = probe.axis.value, spec = AXES[axis], now = transformNow(), values = [], transforms = [];
        for (var i = 0; i < SWEEP_STEPS; i++) {
          var v = spec.lo + (spec.hi - spec.lo) * i / (SWEEP_STEPS - 1);
          values.push(v);
          var t = Object.assign({}, now);
          t[axis] = v;
          transforms.push(t);
        }
        return { path: "/probe", body: probeBody(transforms), axis: axis, values: values };
      });
    }, SWEEP_DELAY_MS);
  }

  function pearson(xs, ys) {
    var n = xs.length, mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (var i = 0; i < n; i++) { mx += xs[i] / n; my += ys[i] / n; }
    for (var j = 0; j < n; j++) { sxy += (xs[j] - mx) * (ys[j] - my); sxx += (xs[j] - mx) * (xs[j] - mx); syy += (ys[j] - my) * (ys[j] - my); }
    return sxx > 0 && syy > 1e-12 ? sxy / Math.sqrt(sxx * syy) : 0;
  }

  var TRACK_COLOURS = ["#2f5bd3", "#d9480f", "#2b8a3e"];

  function drawProbePlot() {
    // drawn at the canvas's displayed size, so its text stays readable on a phone
    var cv = probe.plot, c = cv.getContext("2d"), dpr = window.devicePixelRatio || 1;
    var W = cv.clientWidth || 640, H = Math.round(Math.max(200, Math.min(300, W * 0.47)));
    if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(H * dpr)) { cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr); }
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, W, H);
    if (!sweep || !state.result) return;
    var k = state.selected === null ? state.result.prediction : state.selected, spec = AXES[sweep.axis], xs = sweep.values;
    var dims = [], lengths = sweep.results.map(function (r) { return r.lengths[k]; });
    for (var d = 0; d < CFG.digitDim; d++) {
      var ys = sweep.results.map(function (r) { return r.poses[k][d]; });
      dims.push({ d: d, ys: ys, r: pearson(xs, ys), span: Math.max.apply(null, ys) - Math.min.apply(null, ys) });
    }
    // "tracks the transform": follows it in one direction (|r|) and by a visible amount (span)
    var ranked = dims.slice().sort(function (a, b) { return Math.abs(b.r) * b.span - Math.abs(a.r) * a.span; }).slice(0, 3);
    // poses on the left axis (their own range, symmetric about 0), the length on the right (0..1)
    var m = 0.05;
    dims.forEach(function (s) { s.ys.forEach(function (v) { m = Math.max(m, Math.abs(v)); }); });
    var lo = -m, hi = m;
    var L = 44, R = 64, T = 14, B = 30, pw = W - L - R, ph = H - T - B;
    function X(v) { return L + (v - spec.lo) / (spec.hi - spec.lo) * pw; }
    function Y(v) { return T + (hi - v) / (hi - lo) * ph; }
    function YL(v) { return T + (1 - v) * ph; }
    c.font = "12px system-ui, sans-serif";
    c.fillStyle = "#5b6470";
    c.strokeStyle = "#dde1e6";
    c.lineWidth = 1;
    [lo, 0, hi].forEach(function (v) {
      c.beginPath(); c.moveTo(L, Y(v)); c.lineTo(L + pw, Y(v)); c.stroke();
      c.textAlign = "right"; c.fillText(v.toFixed(2), L - 6, Y(v) + 4);
    });
    // the length's axis (0..1) inside the plot's right edge: the margin beyond is the lines' end labels'
    c.textAlign = "right";
    c.fillText("1", L + pw - 3, YL(1) + 12);
    c.fillText("0", L + pw - 3, YL(0) - 4);
    [spec.lo, (spec.lo + spec.hi) / 2, spec.hi].forEach(function (v) {
      c.textAlign = "center"; c.fillText(fmtAxis(sweep.axis, sweep.axis === "scale" ? v : Math.round(v)), X(v), H - 10);
    });
    function line(ys, colour, width, dash, y) {
      var f = y || Y;
      c.strokeStyle = colour; c.lineWidth = width; c.setLineDash(dash || []);
      c.beginPath();
      ys.forEach(function (v, i) { if (i) c.lineTo(X(xs[i]), f(v)); else c.moveTo(X(xs[i]), f(v)); });
      c.stroke();
      c.setLineDash([]);
    }
    dims.forEach(function (s) { if (ranked.indexOf(s) < 0) line(s.ys, "rgba(91,100,112,0.28)", 1); });
    var labels = ranked.map(function (s, i) {
      line(s.ys, TRACK_COLOURS[i], 2.5);
      return { text: "dim " + (s.d + 1), colour: TRACK_COLOURS[i], y: Y(s.ys[s.ys.length - 1]) };
    });
    line(lengths, "#1b1f24", 3, [6, 4], YL);
    labels.push({ text: "length", colour: "#1b1f24", y: YL(lengths[lengths.length - 1]) });
    spread(labels, T, T + ph, 16).forEach(function (l) { // 12 px text: a descender clear of the next label's ascender
      c.fillStyle = l.colour; c.textAlign = "left";
      c.fillText(l.text, L + pw + 6, l.y + 4);
    });
    var now = parseFloat(probeSliders[sweep.axis].input.value);
    c.strokeStyle = "rgba(47,91,211,0.6)"; c.lineWidth = 1.5;
    c.beginPath(); c.moveTo(X(now), T); c.lineTo(X(now), T + ph); c.stroke();
    var keeps = sweep.results.filter(function (r) { return r.prediction === k; }).length;
    probe.summary.textContent = "Capsule " + k + " against " + spec.name + " (" + fmtAxis(sweep.axis, spec.lo) + " to " +
      fmtAxis(sweep.axis, spec.hi) + "): length " + Math.min.apply(null, lengths).toFixed(2) + " to " + Math.max.apply(null, lengths).toFixed(2) +
      " (dashed, right axis 0 to 1), read as " + k + " at " + keeps + " of " + xs.length + " steps. Pose dimensions that track it most: " +
      ranked.map(function (s) { return (s.d + 1) + " (r = " + (s.r >= 0 ? "+" : "\u2212") + Math.abs(s.r).toFixed(2) + ", moves " + s.span.toFixed(2) + ")"; }).join(", ") +
      "; the other 13 in grey. (r: how closely a dimension follows the " + spec.name + ", from \u22121 to +1.)";
  }

  Object.keys(AXES).forEach(function (a) {
    var s = probeSliders[a];
    s.input.addEventListener("input", function () {
      s.out.textContent = fmtAxis(a, parseFloat(s.input.value));
      if (probe.axis.value !== a) probe.axis.value = a;
      probeLive();
      drawProbePlot();
      scheduleSweep();
    });
  });
  probe.axis.addEventListener("change", scheduleSweep);
  probe.reset.addEventListener("click", function () {
    Object.keys(AXES).forEach(function (a) {
      probeSliders[a].input.value = a === "scale" ? "1" : "0";
      probeSliders[a].out.textContent = fmtAxis(a, parseFloat(probeSliders[a].input.value));
    });
    probeLive();
    scheduleSweep();
  });

  // A new answer (or a cleared page): the probe starts again from what the network now sees.
  function resetProbe() {
    probeChannel.invalidate();
    sweepChannel.invalidate();
    sweep = null;
    var has = !!state.result && !state.result.blank;
    Object.keys(AXES).forEach(function (a) { probeSliders[a].input.disabled = !has; });
    if (!has) {
      setImage(probe.input, null);
      probe.verdict.textContent = "\u2013";
      showLengths(probe.bars, new Array(CFG.numClasses).fill(0));
      probe.summary.textContent = "Draw a digit to probe it.";
      drawProbePlot();
      return;
    }
    probeLive();
    scheduleSweep();
  }

  return { reset: resetProbe, redraw: drawProbePlot, live: probeLive };
}
