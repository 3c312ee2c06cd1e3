/* The routing inspector (page section 3): each iteration of dynamic routing as the server returns it with
 * ?include=routing, as a heat map over what the network saw, with a legend that states the values, bars of the ten
 * lengths, a step control and Play. The page passes its shared state and how to ask the server again.
 */
var PLAY_STEP_MS = 700; // one routing iteration per step while playing

// Ten small vertical bars (a list of `.routing-fill` items) at the given lengths, the longest marked; the probe's too.
export function showLengths(list, lengths) {
  var items = list.children, best = 0;
  for (var k = 1; k < lengths.length; k++) if (lengths[k] > lengths[best]) best = k;
  for (var j = 0; j < items.length; j++) {
    items[j].querySelector(".routing-fill").style.height = (Math.max(0, Math.min(1, lengths[j])) * 100).toFixed(1) + "%";
    items[j].classList.toggle("is-winner", j === best && lengths[j] > 0);
    items[j].setAttribute("aria-label", "Capsule " + j + ": length " + lengths[j].toFixed(2));
  }
}

export function createRoutingInspector(page) {
  var state = page.state, CFG = page.cfg;
  function $(id) { return document.getElementById(id); }
  var els = {
    heatmap: $("routing-heatmap"),
    showCoupling: $("show-coupling"),
    iteration: $("routing-iteration"),
    iterationOut: $("routing-iteration-out"),
    play: $("routing-play"),
    routingView: $("routing-view"),
    routingType: $("routing-type"),
    routingTrained: $("routing-trained"),
    scale: $("routing-scale"),
    scaleLo: $("routing-lo"),
    scaleMark: $("routing-mark"),
    scaleHi: $("routing-hi"),
    legend: $("routing-legend"),
    legendText: $("routing-legend-text"),
    routingBars: $("routing-lengths")
  };


  // Sequential ramp for 0..1 (coupling): pale yellow -> orange -> deep red, opacity growing with the value, so the
  // input stays visible under the map.
  function heat(t) {
    var stops = [[255, 237, 160], [254, 178, 76], [240, 59, 32], [189, 0, 38]];
    var x = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
    var c = stops[i].map(function (a, j) { return Math.round(a + (stops[i + 1][j] - a) * f); });
    return "rgba(" + c[0] + "," + c[1] + "," + c[2] + "," + (0.2 + 0.55 * t).toFixed(3) + ")";
  }

  // Diverging ramp for -1..1 (agreement): blue below zero, red above, clear at zero.
  function diverge(t) {
    var a = Math.min(1, Math.abs(t));
    return (t < 0 ? "rgba(33,102,172," : "rgba(202,0,32,") + (0.08 + 0.72 * a).toFixed(3) + ")";
  }

  function routing() { return state.result && state.result.routing ? state.result.routing : null; }

  function shownIteration(rt) {
    var n = rt.iterations.length, it = state.iteration === null ? rt.trained : state.iteration;
    return Math.max(1, Math.min(n, it));
  }

  function fmtValue(v) { return Math.abs(v) < 10 ? v.toFixed(4) : v.toFixed(1); }

  // One scale for every iteration of the shown map, so that playing shows routing sharpen instead of each step
  // stretched to full colour; the legend says the range in numbers.
  function scaleOf(rt, view, k) {
    var lo = Infinity, hi = -Infinity;
    rt.iterations.forEach(function (step) {
      step[view + "_grid"][k].forEach(function (row) { row.forEach(function (v) { lo = Math.min(lo, v); hi = Math.max(hi, v); }); });
    });
    if (view === "agreement") { var m = Math.max(Math.abs(lo), Math.abs(hi), 1e-9); return { lo: -m, hi: m }; }
    return { lo: lo, hi: Math.max(hi, lo + 1e-9) };
  }

  function colourOf(view, v, sc) {
    return view === "agreement" ? diverge(v / sc.hi) : heat((v - sc.lo) / (sc.hi - sc.lo));
  }

  function drawRouting() {
    var cv = els.heatmap, c = cv.getContext("2d"), size = cv.width;
    c.clearRect(0, 0, size, size);
    var rt = routing(), has = !!rt && state.selected !== null;
    els.iteration.disabled = !has;
    els.play.disabled = !has;
    if (!has) { showRoutingOff(); return; }
    var n = rt.iterations.length, it = shownIteration(rt), step = rt.iterations[it - 1], k = state.selected;
    var view = els.routingView.value, grid = step[view + "_grid"][k], g = grid.length, sc = scaleOf(rt, view, k);
    els.iteration.max = String(n);
    els.iteration.value = String(it);
    els.routingTrained.textContent = String(rt.trained);
    els.iterationOut.textContent = it + " of " + n + (it === rt.trained ? " (trained)" : it > rt.trained ? " (beyond training)" : "");
    // Primary capsule (row, col) sees input pixels 2*row .. 2*row+16 (conv 9x9, then 9x9 stride 2):
    // its cell is drawn 2x2 input pixels wide, centred on that receptive field.
    var px = size / CFG.imageSize, stride = CFG.primaryStride, first = (CFG.imageSize - stride * g) / 2;
    for (var y = 0; y < g; y++) {
      for (var x = 0; x < g; x++) {
        c.fillStyle = colourOf(view, grid[y][x], sc);
        c.fillRect((first + stride * x) * px, (first + stride * y) * px, stride * px, stride * px);
      }
    }
    c.strokeStyle = "rgba(255,255,255,0.7)";
    c.lineWidth = Math.max(1, px / 5);
    c.strokeRect(first * px, first * px, stride * g * px, stride * g * px);
    showLegend(rt, view, step, sc, it, n);
    showRoutingBars(step.lengths, it === rt.trained);
  }

  function showLegend(rt, view, step, sc, it, n) {
    var c = els.scale.getContext("2d"), w = els.scale.width, h = els.scale.height;
    c.clearRect(0, 0, w, h);
    for (var x = 0; x < w; x++) {
      c.fillStyle = colourOf(view, sc.lo + (sc.hi - sc.lo) * (x + 0.5) / w, sc);
      c.fillRect(x, 0, 1, h);
    }
    // the reference value on the scale: uniform coupling, or zero agreement
    var mark = view === "coupling" ? rt.uniform_coupling : 0, at = Math.max(0, Math.min(1, (mark - sc.lo) / (sc.hi - sc.lo)));
    c.fillStyle = "#ffffff";
    c.fillRect(Math.round(at * (w - 2)), 0, 2, h);
    els.scaleMark.style.left = (at * 100).toFixed(1) + "%";
    // the label slides from left-aligned (mark at the start) to right-aligned (at the end): it never leaves the bar
    els.scaleMark.style.transform = "translateX(" + (-at * 100).toFixed(1) + "%)";
    var range = step[view + "_range"], k = state.selected;
    var who = rt.capsule_type === "mean" ? "all " + (els.routingType.options.length - 1) + " capsule types (mean)" : "capsule type " + (rt.capsule_type + 1);
    els.scaleLo.textContent = fmtValue(sc.lo);
    els.scaleHi.textContent = fmtValue(sc.hi);
    var grid = step[view + "_grid"][k], lo = Infinity, hi = -Infinity;
    grid.forEach(function (row) { row.forEach(function (v) { lo = Math.min(lo, v); hi = Math.max(hi, v); }); });
    if (view === "coupling") {
      els.scaleMark.textContent = "uniform " + fmtValue(rt.uniform_coupling);
      els.legendText.textContent = "Coupling of " + who + " to capsule " + k + ", iteration " + it + " of " + n + ": " +
        (hi - lo < 5e-5 ? "all " + fmtValue(lo) + " (routing starts uniform: 1/" + CFG.numClasses + " to each digit)"
                        : fmtValue(lo) + " to " + fmtValue(hi) + " (uniform would be " + fmtValue(rt.uniform_coupling) + ")") +
        ". Colours span " + fmtValue(sc.lo) + " to " + fmtValue(sc.hi) + ", the range over all " + n +
        " iterations, not stretched per step. All digits' maps at this iteration: " + fmtValue(range[0]) + " to " + fmtValue(range[1]) + ".";
    } else {
      els.scaleMark.textContent = "0";
      els.legendText.textContent = "Agreement \u00fb\u00b7v of " + who + " with capsule " + k + " after iteration " + it + " of " + n + ": " +
        fmtValue(lo) + " to " + fmtValue(hi) + " (blue: predicted against the capsule's pose, red: with it; what the next iteration adds " +
        "to the routing logits b, the scores whose softmax over the digits is the coupling). Colours span \u00b1" + fmtValue(sc.hi) + " over all " + n + " iterations.";
    }
  }

  function showRoutingBars(lengths, trained) {
    showLengths(els.routingBars, lengths);
    els.routingBars.classList.toggle("is-trained", trained);
  }

  function showRoutingOff() {
    stopPlay();
    els.iterationOut.textContent = "\u2013";
    els.scaleLo.textContent = els.scaleHi.textContent = "\u2013";
    els.scaleMark.textContent = "";
    els.scale.getContext("2d").clearRect(0, 0, els.scale.width, els.scale.height);
    els.legendText.textContent = CFG.routing
      ? "Draw a digit to see routing."
      : "This server has no routing trace (weights/routing.onnx), so routing cannot be shown here.";
    showRoutingBars(new Array(CFG.numClasses).fill(0), false);
  }

  var playTimer = null;
  function stopPlay() {
    if (playTimer) { clearInterval(playTimer); playTimer = null; }
    els.play.textContent = "Play";
    els.play.setAttribute("aria-pressed", "false");
  }
  els.play.addEventListener("click", function () {
    if (playTimer) { stopPlay(); return; }
    var rt = routing();
    if (!rt) return;
    state.iteration = 1;
    drawRouting();
    els.play.textContent = "Pause";
    els.play.setAttribute("aria-pressed", "true");
    playTimer = setInterval(function () {
      var now = routing();
      if (!now || shownIteration(now) >= now.iterations.length) { stopPlay(); return; }
      state.iteration = shownIteration(now) + 1;
      drawRouting();
    }, PLAY_STEP_MS);
  });
  els.iteration.addEventListener("input", function () {
    stopPlay();
    state.iteration = parseInt(els.iteration.value, 10);
    drawRouting();
  });
  els.routingView.addEventListener("change", drawRouting);
  // Another capsule type's maps: the same input asked again (the answer carries that type's grids).
  els.routingType.addEventListener("change", function () {
    if (!state.result || !state.lastBody) return;
    page.askAgain();
  });

  // the legend states the map's colours and range: without the map it would describe nothing on the page
  els.showCoupling.addEventListener("change", function () {
    els.heatmap.classList.toggle("is-hidden", !els.showCoupling.checked);
    els.legend.hidden = !els.showCoupling.checked;
  });

  // the capsule type whose maps the server is asked for: "mean" or 0-31
  function capsuleType() { return els.routingType.value; }

  return { draw: drawRouting, capsuleType: capsuleType };
}
