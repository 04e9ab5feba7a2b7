/* reportgen charts: draws every .rg-chart from its inert JSON spec with vegaEmbed.
 * The charts in the first screen first (IntersectionObserver's first report); when they are drawn the page is
 * ready: <html data-charts-ready="1">. Then the rest, one per idle slice (a chart scrolled into view is drawn at
 * once), and all of them before printing; when every chart is drawn, <html data-charts-done="1">, and when the
 * tables are built too (table.js: data-tables-done), <html data-all-done="1">. Page controls set Vega signals.
 * A finding's "See the chart" link (data-view) sets the controls and chart parameters that show it, then scrolls
 * to the chart; a chart whose spec has usermeta.rg_click sets a control from the datum clicked. Nothing here
 * fetches anything; errors are written as text, never as HTML. When a finding's view is shown,
 * <html data-view-shown="figure id">. The charts follow the reader's colour scheme, also when it changes while the
 * page is open (retheme): <html data-charts-theme="light|dark"> once every chart is drawn in it. */
(function () {
  "use strict";
  var doc = document;
  var root = doc.documentElement;
  var charts = Array.prototype.slice.call(doc.querySelectorAll(".rg-chart[data-spec]"));
  var remaining = charts.length;
  var first = null;                /* the charts of the first screen still drawing (null: not known yet) */
  var views = [];                  /* {el, view, section, names} of every drawn chart */
  var chosen = Object.create(null); /* section id -> {signal: value} picked with the controls */
  var pinned = Object.create(null); /* figure id -> {signal: value} set by a finding's view (no control) */
  var FOCUS = ["focus_ranks", "focus_links"]; /* highlight parameters (reportgen/charts.py focusable) */
  var dark = !!(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  var observer = null;
  var VECTOR = /(?:^|&)renderer=svg(?:&|$)/.test(String(window.location.search || "").slice(1));
  /* ?draw=scrolled: after the first screen a chart is drawn only when scrolled to (or printed), never in idle time
   * (for checks of the tables and the layout, which need no chart below the fold) */
  var SCROLLED = /(?:^|&)draw=scrolled(?:&|$)/.test(String(window.location.search || "").slice(1));
  /* ?data=whole: every chart gets all its rows (no partitioned datasets, see partitions) */
  var WHOLE = /(?:^|&)data=whole(?:&|$)/.test(String(window.location.search || "").slice(1));
  /* One chart draws at a time (charts drawn together each wait for all of them), then a frame is painted, then the
   * next: the charts asked for (in the first screen or scrolled to), the one showing most of itself in the viewport
   * first, then the newest asked for; after the first screen, a chart asked for only when it is in the viewport (the
   * ones near it wait for idle time); when none is, the rest in idle slices, the ones near the viewport first (none
   * started within 200 ms of a scroll or of drawing a chart asked for: the reader's next chart would wait). */
  var busy = false, wanted = [], idleOn = false, idleWaiting = false, scrolled = 0;
  var pumpOnFrame = false; /* a chart asked for while near the viewport is drawn once it comes into view */
  window.addEventListener("scroll", function () {
    scrolled = Date.now();
    if (!wanted.length || pumpOnFrame || !window.requestAnimationFrame) return;
    pumpOnFrame = true;
    window.requestAnimationFrame(function () { pumpOnFrame = false; pump(); });
  }, { passive: true });
  function painted() { /* a page in the background paints no frame: then 100 ms */
    return new Promise(function (resolve) {
      var t = window.setTimeout(resolve, 100);
      if (window.requestAnimationFrame) window.requestAnimationFrame(function () {
        window.clearTimeout(t);
        window.setTimeout(resolve, 0);
      });
    });
  }
  function ask(els) {
    els.forEach(function (el) { if (!el.rgStarted && wanted.indexOf(el) < 0) wanted.push(el); });
    pump();
  }
  /* inView: only a chart in the viewport (after the first screen, the ones just near it are drawn in idle time, so that
   * the next chart scrolled to does not wait for them) */
  function pickWanted(inView) {
    wanted = wanted.filter(function (el) { return !el.rgStarted; });
    if (!wanted.length) return null;
    var h = window.innerHeight || 800, best = null, most = 0;
    wanted.forEach(function (el) { /* the one that shows most of itself in the viewport */
      var r = el.getBoundingClientRect(), seen = Math.min(r.bottom, h) - Math.max(r.top, 0);
      if (seen > most) { best = el; most = seen; }
    });
    if (!best && inView) return null;
    best = best || wanted[wanted.length - 1];
    wanted.splice(wanted.indexOf(best), 1);
    return best;
  }
  function nextQueued() {
    while (queue.length && queue[0].rgStarted) queue.shift();
    return queue.length ? queue.shift() : null;
  }
  function run(el, asked) {
    busy = true;
    /* a chart asked for (scrolled to) counts as scrolling: the reader may go on to the next one, which must not
     * wait for a chart started in idle time meanwhile */
    (asked ? render(el).then(painted) : render(el)).then(function () {
      busy = false;
      if (asked) scrolled = Date.now();
      pump();
    });
  }
  function pump() {
    if (busy) return;
    var el = pickWanted(idleOn);
    if (el) { run(el, true); return; }
    if (!idleOn || idleWaiting || !queue.some(function (e) { return !e.rgStarted; })) return;
    idleWaiting = true;
    /* idle, then after the next frame: a scroll made since the last frame (scrollIntoView, a link) has fired its
     * event by then, and an idle slice left over from that frame must not start a chart in front of it */
    idle(function () { painted().then(function () {
      idleWaiting = false;
      if (busy) return;
      if (Date.now() - scrolled < 200) { /* the reader is scrolling: the chart scrolled to must not wait for this one */
        window.setTimeout(pump, 200);
        return;
      }
      var e = pickWanted(false) || nextQueued(); /* the ones near the viewport first */
      if (e) run(e, false);
    }); });
  }

  /* Warnings and errors logged while the charts draw (Vega-Lite's compiler and Vega's views write them with
   * console.warn / console.error): kept, with the chart that last started drawing, for reportgenCharts.logged()
   * (the tests read them: a page logs none), and still written to the console. */
  var logged = [];
  var drawing = "";
  if (window.console) {
    ["warn", "error"].forEach(function (level) {
      var write = console[level];
      if (typeof write !== "function") return;
      console[level] = function () {
        try {
          logged.push({ level: level, chart: drawing,
                        text: Array.prototype.map.call(arguments, function (a) { return String(a); }).join(" ") });
        } catch (e) { /* a message that cannot be read as text is still written below */ }
        return write.apply(console, arguments);
      };
    });
  }

  function ready() {
    if (root.dataset.chartsReady === "1") return;
    root.dataset.chartsReady = "1";
    idleOn = !SCROLLED; /* the rest of the charts, in idle slices */
    pump();
  }
  function done() {
    root.dataset.chartsTheme = dark ? "dark" : "light";
    root.dataset.chartsDone = "1";
    if (root.dataset.tablesDone === "1") root.dataset.allDone = "1";
  }
  function settled(el) {
    el.rgSettled = true;
    remaining -= 1;
    if (first && first.indexOf(el) >= 0) {
      first.splice(first.indexOf(el), 1);
      if (!first.length) ready();
    }
    if (remaining === 0) { ready(); done(); }
  }

  function sectionOf(el) {
    var s = el.closest("section");
    return s ? s.id : "";
  }

  function message(err) {
    if (err && typeof err.message === "string" && err.message) return err.message;
    return String(err);
  }

  /* keepChart: a drawn chart whose later signal update failed keeps its drawing */
  function showError(el, err, keepChart) {
    var text = message(err);
    el.setAttribute("data-error", text);
    var p = doc.createElement("p");
    p.className = "rg-chart-error";
    p.setAttribute("role", "alert");
    p.textContent = "This chart could not be drawn: " + text;
    if (!keepChart) el.textContent = "";
    el.appendChild(p);
    if (window.console) console.warn("reportgen chart " + (el.getAttribute("data-spec") || "") + ": " + text);
  }

  /* A vega loader that refuses every URL: specs carry their data inline. */
  function offlineLoader() {
    if (!window.vega || typeof window.vega.loader !== "function") return undefined;
    var ld = window.vega.loader();
    var sanitize = ld.sanitize;
    function refuse(uri) {
      return Promise.reject(new Error("this offline report does not load " + String(uri).slice(0, 80)));
    }
    ld.load = refuse;
    ld.http = refuse;
    ld.file = refuse;
    ld.sanitize = function (uri, options) {
      if (/^data:/i.test(String(uri))) return sanitize.call(ld, uri, options);
      return refuse(uri);
    };
    return ld;
  }

  function embedOptions(el) {
    var fig = el.closest("figure");
    var opts = {
      /* canvas for many marks (render.share_chart_data); ?renderer=svg draws every chart as SVG (vector print) */
      renderer: !VECTOR && el.getAttribute("data-renderer") === "canvas" ? "canvas" : "svg",
      actions: { export: true, source: false, compiled: false, editor: false },
      downloadFileName: fig && fig.id ? fig.id : "chart"
    };
    var loader = offlineLoader();
    if (loader) opts.loader = loader;
    if (dark) {
      opts.theme = "dark";
      opts.config = darkConfig();
    }
    return opts;
  }

  /* Theme: chart text, axes, rules (whiskers, mean lines, graph edges without a colour of their own) and
   * legends take the page's own colours (report.css custom properties), so they stay readable on the dark
   * page (>= 3:1). Data colours come from the specs (reportgen/palette.py) and do not change. */
  function cssColor(name, fallback) {
    var v = window.getComputedStyle(root).getPropertyValue(name);
    return v && v.trim() ? v.trim() : fallback;
  }
  function darkConfig() {
    /* the page colour, not transparent: printed on white paper, light text needs its dark box */
    var bg = window.getComputedStyle(doc.body).backgroundColor;
    var fg = cssColor("--fg", "#e2e6ea");
    var muted = cssColor("--muted", "#9aa4ae");
    var faint = cssColor("--border", "#3a424b");
    var line = { color: fg };
    return {
      background: bg && bg !== "rgba(0, 0, 0, 0)" ? bg : "#15181c",
      title: { color: fg, subtitleColor: muted },
      style: { "guide-label": { fill: fg }, "guide-title": { fill: fg } },
      axis: { domainColor: muted, tickColor: muted, gridColor: faint, labelColor: fg, titleColor: fg },
      legend: { labelColor: fg, titleColor: fg },
      view: { stroke: muted },
      text: { color: fg },
      rule: line,
      tick: line,
      boxplot: { rule: line, ticks: line },
      errorbar: { rule: line, ticks: line }
    };
  }

  /* Narrow screens (a phone: a chart box below NARROW px). A legend beside or above the plot takes the width the
   * plot needs, and a row of legend entries wider than the box is drawn outside the SVG (cut); so there every
   * legend goes below the plot, one entry per line, its labels and title as long as the box allows. */
  var NARROW = 600;
  /* words of `text` in lines of at most `chars` characters (a longer word is cut into pieces of `chars`) */
  function wrapText(text, chars) {
    var lines = [];
    String(text).split(/\s+/).forEach(function (word) {
      while (word.length > chars) { lines.push(word.slice(0, chars)); word = word.slice(chars); }
      var last = lines.length ? lines[lines.length - 1] : null;
      if (last !== null && last.length + 1 + word.length <= chars) lines[lines.length - 1] = last + " " + word;
      else if (word) lines.push(word);
    });
    return lines.length > 1 ? lines : String(text);
  }
  var LEGEND_CHANNELS = ["color", "fill", "stroke", "shape", "size", "opacity", "fillOpacity", "strokeOpacity",
                         "strokeWidth", "strokeDash", "angle"];
  function narrowLegends(spec, width) {
    var room = Math.max(100, Math.floor(width * 0.6) - 60); /* beside the y axis (its labels: 35% at most) */
    var chars = Math.max(12, Math.floor(room / 6.5));
    var axisLimit = Math.max(60, Math.floor(width * 0.35));
    /* the label split into lines (a Vega expression; Vega draws an array of strings as lines) */
    function lines(expr) {
      return "split(trim(replace((" + expr + ") + '', regexp('(.{1," + chars + "})(?:\\\\s+|$)|(\\\\S{" + chars +
        "})', 'g'), '$1$2\\n')), '\\n')";
    }
    function legend(lg, title) {
      if (!lg || typeof lg !== "object" || Array.isArray(lg)) return lg;
      var out = Object.assign({}, lg);
      if (out.orient !== "none" && out.legendX === undefined && out.legendY === undefined) out.orient = "bottom";
      out.columns = 1;
      delete out.direction;
      out.labelLimit = Math.max(out.labelLimit || 0, width);
      out.titleLimit = Math.max(out.titleLimit || 0, width);
      out.labelExpr = lines(typeof out.labelExpr === "string" ? out.labelExpr : "datum.label");
      var t = out.title !== undefined ? out.title : title;
      if (typeof t === "string") out.title = wrapText(t, chars);
      if (typeof out.gradientLength === "number") out.gradientLength = Math.min(out.gradientLength, room);
      return out;
    }
    function walk(node) {
      if (!node || typeof node !== "object") return;
      if (Array.isArray(node)) { node.forEach(walk); return; }
      var enc = node.encoding;
      if (enc && typeof enc === "object") {
        LEGEND_CHANNELS.forEach(function (ch) {
          var def = enc[ch];
          if (!def || typeof def !== "object" || Array.isArray(def) || def.legend === null) return;
          /* a channel with a legend: a field (or aggregate / datum), not a value or a value-only condition */
          if (!def.field && !def.aggregate && def.datum === undefined && !(def.condition && def.condition.field)) return;
          enc[ch] = Object.assign({}, def, { legend: legend(def.legend || {}, def.title) });
        });
        var x = enc.x; /* a long x axis title in lines (centred on a narrow plot, one line overhangs the SVG) */
        if (x && typeof x === "object" && x.axis !== null) {
          var xt = x.axis && x.axis.title !== undefined ? x.axis.title : x.title;
          if (typeof xt === "string" && xt.length > chars) {
            enc.x = Object.assign({}, x, { axis: Object.assign({}, x.axis || {}, { title: wrapText(xt, chars) }) });
          }
        }
        var y = enc.y;
        if (y && typeof y === "object" && y.axis && typeof y.axis === "object") {
          y.axis = Object.assign({}, y.axis, { labelLimit: Math.min(y.axis.labelLimit || axisLimit, axisLimit) });
        }
      }
      /* a view's title (13 px bold) in lines: a long title is centred on the view and overhangs the SVG */
      var view = ["mark", "layer", "vconcat", "hconcat", "concat", "facet", "spec"].some(function (k) { return k in node; });
      var titleChars = Math.max(16, Math.floor(width / 9.5));
      if (view && typeof node.title === "string" && node.title.length > titleChars) {
        node.title = wrapText(node.title, titleChars);
      } else if (view && node.title && typeof node.title === "object" && typeof node.title.text === "string" &&
                 node.title.text.length > titleChars) {
        node.title = Object.assign({}, node.title, { text: wrapText(node.title.text, titleChars) });
      }
      Object.keys(node).forEach(function (k) {
        if (k !== "datasets" && k !== "data" && k !== "encoding") walk(node[k]);
      });
      if (enc && typeof enc === "object") walk(enc.row || null);
    }
    walk(spec);
    var config = spec.config = Object.assign({}, spec.config || {});
    config.legend = Object.assign({}, config.legend || {}, { orient: "bottom", columns: 1, labelLimit: width,
                                                             titleLimit: width });
    config.axisY = Object.assign({}, config.axisY || {}, { labelLimit: axisLimit });
    return spec;
  }
  /* several legends below the plot: one under the other, not side by side (a Vega option, set in the compiled spec) */
  function stackLegends(vg) {
    vg.config = Object.assign({}, vg.config || {});
    vg.config.legend = Object.assign({}, vg.config.legend || {}, {
      layout: { bottom: { direction: "vertical", anchor: "start", margin: 6 } }
    });
    return vg;
  }

  /* The box a chart may take (its element's content box, less vega-embed's room for the actions button). */
  function roomOf(el) {
    var wrap = el.querySelector(".vega-embed") || el;
    var cs = window.getComputedStyle(wrap);
    return wrap.clientWidth - (parseFloat(cs.paddingLeft) || 0) - (parseFloat(cs.paddingRight) || 0);
  }
  function drawnWidth(el) {
    var node = el.querySelector("svg.marks, canvas.marks");
    return node ? node.getBoundingClientRect().width : 0;
  }
  /* A chart whose width is computed (a step per column, or a fixed width) and is wider than a narrow box: its
   * columns (signal x_step) or its plot (signal width) are made narrower so that the whole chart fits, its text
   * keeping its size; what still does not fit is scaled down by report.css (never cut, never scrolling the page). */
  function fitNarrow(entry) {
    var el = entry.el, view = entry.view;
    var excess = drawnWidth(el) - roomOf(el);
    if (!(excess > 1) || roomOf(el) >= NARROW) return Promise.resolve();
    var has = function (name) { try { view.signal(name); return true; } catch (e) { return false; } };
    try {
      var plot = has("width") ? Number(view.signal("width")) : 0;
      if (has("x_step") && plot > 0) {
        var step = Number(view.signal("x_step"));
        view.signal("x_step", Math.max(2, Math.floor(step * Math.max(0.1, (plot - excess) / plot))));
      } else if (plot > 0 && !entry.fits) {
        view.width(Math.max(60, Math.floor(plot - excess)));
      } else {
        return Promise.resolve();
      }
      return view.runAsync();
    } catch (e) {
      return Promise.resolve();
    }
  }

  /* Names of the top-level variable params (Vega-Lite) or signals (Vega) a spec declares. */
  function declared(spec) {
    var names = Object.create(null);
    var params = Array.isArray(spec.params) ? spec.params : [];
    params.forEach(function (p) {
      if (p && typeof p.name === "string" && !p.select) names[p.name] = true;
    });
    var signals = Array.isArray(spec.signals) ? spec.signals : [];
    signals.forEach(function (s) {
      if (s && typeof s.name === "string") names[s.name] = true;
    });
    return names;
  }

  function figureOf(el) {
    var f = el.closest("figure");
    return f ? f.id : "";
  }

  /* Apply control values chosen before this chart was drawn (or restored by the browser), and the
   * parameters a finding's view pinned on this figure. */
  function applyChosen(entry) {
    var changed = false;
    [chosen[entry.section], pinned[entry.figure]].forEach(function (picked) {
      if (!picked) return;
      Object.keys(picked).forEach(function (name) {
        if (!entry.names[name]) return;
        if (JSON.stringify(entry.view.signal(name)) !== JSON.stringify(picked[name])) {
          setSignal(entry, name, picked[name]);
          changed = true;
        }
      });
    });
    return changed ? entry.view.runAsync() : Promise.resolve();
  }

  /* Chart data shared by the specs (render.share_chart_data): {key: rows or {n, c: [[key, column]]}}, a text
   * column as {d: distinct, i: indices}. A spec holds {"$rg": key} where its rows were. Parsed once, on first use. */
  var store = null;
  function blockOf(key) {
    if (store === null) {
      var holder = doc.getElementById("rg-chart-store");
      store = holder ? JSON.parse(holder.textContent) : {};
    }
    var block = Object.prototype.hasOwnProperty.call(store, key) ? store[key] : null;
    if (block === null) throw new Error("its data is missing from the page");
    return block;
  }
  /* the rows of a column block: every row, or those at the positions `picked` */
  function made(block, picked) {
    var n = picked ? picked.length : block.n, out = new Array(n), i, j;
    for (i = 0; i < n; i += 1) out[i] = {};
    for (j = 0; j < block.c.length; j += 1) {
      var name = block.c[j][0], col = block.c[j][1];
      var at = picked ? function (r) { return picked[r]; } : function (r) { return r; };
      if (Array.isArray(col)) {
        for (i = 0; i < n; i += 1) out[i][name] = col[at(i)];
      } else {
        for (i = 0; i < n; i += 1) out[i][name] = col.d[col.i[at(i)]];
      }
    }
    return out;
  }
  function rows(key) {
    var block = blockOf(key);
    return Array.isArray(block) ? block.slice() : made(block, null);
  }
  /* The rows of a store block (or of a spec's own row list) whose `field` equals `value` or `keep` by JavaScript's
   * ==, as Vega evaluates the filter "datum.field == value || datum.field == keep"; a column block's rows are made
   * only for the rows kept. */
  function rowsWhere(ref, field, value, keep) {
    var hit = function (v) { return v == value || (keep !== undefined && v == keep); }; /* eslint-disable-line eqeqeq */
    var block = isRef(ref) ? blockOf(ref.$rg) : ref;
    if (Array.isArray(block)) return block.filter(function (row) { return hit(row[field]); });
    var col = null, picked = [], i;
    block.c.forEach(function (c) { if (c[0] === field) col = c[1]; });
    for (i = 0; i < block.n; i += 1) {
      if (hit(col === null ? undefined : Array.isArray(col) ? col[i] : col.d[col.i[i]])) picked.push(i);
    }
    return made(block, picked);
  }

  /* Partitioned data. A dataset of spec.datasets every use of which first keeps the rows whose field F equals a plain
   * parameter P - a filter "datum.F == P", "datum.F == P || datum.F == K" or "datum.F == P && (...)", after only
   * calculates and lookups that do not write F (they keep every row) - is given to Vega as those rows only, and
   * replaced by the rows of the new value when P changes (setSignal). The filter stays in the spec, so the chart
   * shows the same marks; Vega only ingests and scans fewer rows (a rank picker over 1,024 ranks: one rank's rows
   * instead of all of them). Returns {dataset: {field, signal, keep, value}}; a dataset used any other way (a
   * lookup's source, a view that does not filter it so first or that names a format, an expression naming it, as
   * data('D') does) is not partitioned, nor is any of a spec with a temporal field or a time unit (Vega-Lite parses
   * those before the filter, and the rows given later would not be). */
  var PART_FILTER = /^datum\.([A-Za-z_]\w*) == ([A-Za-z_]\w*)(?: \|\| datum\.\1 == (-?\d+(?:\.\d+)?)| && (\(.*\)))?$/;
  function wholeGroup(text) { /* "(...)" is one parenthesised group (no quotes or regular expressions: a literal might
                                 hold a parenthesis) */
    if (/["'`\\/]/.test(text)) return false;
    var depth = 0, i;
    for (i = 0; i < text.length; i += 1) {
      if (text[i] === "(") depth += 1;
      else if (text[i] === ")") { depth -= 1; if (depth === 0 && i < text.length - 1) return false; }
      if (depth < 0) return false;
    }
    return depth === 0;
  }
  function partitions(spec) {
    var sets = spec && spec.datasets && typeof spec.datasets === "object" ? spec.datasets : null;
    if (!sets || WHOLE || /"(?:temporal|timeUnit)"/.test(JSON.stringify(spec))) return {};
    var plain = Object.create(null);
    (Array.isArray(spec.params) ? spec.params : []).forEach(function (p) {
      if (p && typeof p.name === "string" && "value" in p && !p.select && !p.expr && !p.bind && !p.update && !p.on) {
        plain[p.name] = p.value;
      }
    });
    var found = Object.create(null), bad = Object.create(null);
    function use(name, how) {
      if (!Object.prototype.hasOwnProperty.call(sets, name)) return;
      if (!how || bad[name] || (found[name] && (found[name].field !== how.field || found[name].signal !== how.signal ||
                                                 found[name].keep !== how.keep))) {
        bad[name] = true;
        return;
      }
      found[name] = how;
    }
    /* the names a calculate or lookup transform writes (null: not one of those, which may drop rows, or a lookup
     * that names neither its fields nor where they go) */
    function writes(t) {
      if (!t || typeof t !== "object") return null;
      if (t.calculate !== undefined) return [t.as];
      if (t.lookup === undefined) return null;
      var fields = t.from && Array.isArray(t.from.fields) ? t.from.fields : [];
      return t.as || fields.length ? [].concat(t.as || [], fields) : null;
    }
    function filterOf(transforms) {
      if (!Array.isArray(transforms)) return null;
      var before = [];
      for (var i = 0; i < transforms.length; i += 1) {
        var t = transforms[i];
        var m = t && typeof t.filter === "string" ? PART_FILTER.exec(t.filter) : null;
        if (!m) {
          var w = writes(t);
          if (!w) return null;
          before = before.concat(w);
          continue;
        }
        /* what comes before keeps every row and leaves the field as the data has it */
        if (before.indexOf(m[1]) >= 0 || !Object.prototype.hasOwnProperty.call(plain, m[2]) ||
            (m[4] && !wholeGroup(m[4]))) return null;
        return { field: m[1], signal: m[2], keep: m[3] !== undefined ? Number(m[3]) : undefined };
      }
      return null;
    }
    function walk(node, key) {
      if (typeof node === "string") { /* an expression reading a dataset by its name sees all of it */
        Object.keys(sets).forEach(function (name) { if (node.indexOf(name) >= 0) bad[name] = true; });
        return;
      }
      if (!node || typeof node !== "object") return;
      if (Array.isArray(node)) { node.forEach(function (n) { walk(n, ""); }); return; }
      if (key !== "datasets") {
        var d = node.data;
        if (d && typeof d === "object" && typeof d.name === "string") {
          use(d.name, key === "from" || d.format ? null : filterOf(node.transform));
        }
        Object.keys(node).forEach(function (k) { if (k !== "data") walk(node[k], k); });
      }
    }
    walk(spec, "");
    var out = {};
    Object.keys(found).forEach(function (name) {
      if (bad[name]) return;
      out[name] = found[name];
      out[name].value = plain[found[name].signal];
    });
    return out;
  }
  /* set a parameter of a drawn chart (the caller runs the view), and the rows of the datasets partitioned on it */
  function setSignal(entry, name, value) {
    entry.view.signal(name, value);
    Object.keys(entry.parts).forEach(function (d) {
      var p = entry.parts[d];
      if (p.signal !== name || JSON.stringify(p.value) === JSON.stringify(value)) return;
      entry.view.data(d, rowsWhere(p.ref, p.field, value, p.keep));
      p.value = value; /* once replaced: a failed replacement is tried again */
    });
  }
  function isRef(v) {
    return v && typeof v === "object" && !Array.isArray(v) && typeof v.$rg === "string";
  }
  function restore(spec, parts) {
    if (!spec || typeof spec !== "object") return spec;
    if (Array.isArray(spec)) { spec.forEach(function (s) { restore(s); }); return spec; }
    Object.keys(spec).forEach(function (k) {
      var v = spec[k];
      if (k === "datasets" && v && typeof v === "object") {
        Object.keys(v).forEach(function (name) {
          var p = parts && parts[name];
          if (p && !isRef(v[name]) && !Array.isArray(v[name])) delete parts[name];
          else if (p) {
            p.ref = v[name];
            v[name] = rowsWhere(p.ref, p.field, p.value, p.keep);
          } else if (isRef(v[name])) {
            v[name] = rows(v[name].$rg);
          }
        });
      } else if (k === "data" && v && typeof v === "object" && isRef(v.values)) {
        v.values = rows(v.values.$rg);
      } else {
        restore(v);
      }
    });
    return spec;
  }

  function render(el) {
    if (el.rgStarted) return el.rgStarted;
    if (observer) observer.unobserve(el);
    var spec = null, wide = false, parts = {}, entry = null, drawnDark = dark;
    el.rgStarted = new Promise(function (resolve) {
      var holder = doc.getElementById(el.getAttribute("data-spec") || "");
      if (!holder) throw new Error("its data is missing from the page");
      spec = JSON.parse(holder.textContent);
      parts = partitions(spec);
      spec = restore(spec, parts);
      if (typeof window.vegaEmbed !== "function") throw new Error("the chart library did not load");
      if (spec && spec.usermeta && spec.usermeta.embedOptions) delete spec.usermeta.embedOptions;
      drawing = el.getAttribute("data-spec") || "";
      drawnDark = dark;
      var options = embedOptions(el);
      /* a box wide enough for any chart needs no fitting after drawing (fitNarrow reads the drawn layout: a forced
       * layout of the whole page per chart) */
      wide = el.clientWidth >= NARROW + 100;
      if (el.clientWidth && el.clientWidth < NARROW) {
        narrowLegends(spec, el.clientWidth - 40); /* (40 px: vega-embed's actions button) */
        options.patch = stackLegends;
      }
      resolve(window.vegaEmbed(el, spec, options));
    }).then(function (result) {
      var auto = spec && spec.autosize, kind = auto && typeof auto === "object" ? auto.type : auto;
      entry = { el: el, view: result.view, section: sectionOf(el), figure: figureOf(el), names: declared(spec),
                fits: typeof kind === "string" && kind.indexOf("fit") === 0, parts: parts, dark: drawnDark,
                finalize: result.finalize }; /* (vega-embed's: the view and the actions menu's page listener) */
      views.push(entry);
      clickSets(entry, spec && spec.usermeta && spec.usermeta.rg_click);
      if (!(spec && spec.usermeta && spec.usermeta.rg_click)) clickRank(entry, spec);
      return applyChosen(entry).then(function () { return wide ? null : fitNarrow(entry); });
    }).then(function () {
      el.setAttribute("data-rendered", "1");
    }, function (err) {
      showError(el, err, false);
    }).then(function () {
      el.style.minHeight = "";
      settled(el);
      /* the colour scheme changed while it was drawn: drawn again (retheme) */
      if (entry && entry.dark !== dark && views.indexOf(entry) >= 0) { redraw([entry]); pump(); }
    });
    return el.rgStarted;
  }

  /* The reader's system turns dark (or light) while the page is open: report.css follows at once, and the charts
   * drawn so far are drawn again in the new theme (their colours are compiled into the drawing: darkConfig), the
   * ones in view first, the rest as at load (in idle time, or when scrolled to); the charts not drawn yet take it
   * when drawn. Meanwhile data-charts-done is unset; once every chart is drawn again, <html data-charts-done="1"
   * data-charts-theme="dark|light">. */
  function redraw(entries) {
    /* every height read before any chart is emptied (one layout, not one per chart) */
    var heights = entries.map(function (entry) { return entry.el.getBoundingClientRect().height; });
    entries.forEach(function (entry, i) {
      var el = entry.el;
      views.splice(views.indexOf(entry), 1);
      if (heights[i] > 0) el.style.minHeight = heights[i] + "px"; /* the page does not move while it is redrawn */
      try {
        if (typeof entry.finalize === "function") entry.finalize(); else entry.view.finalize();
      } catch (e) { /* a view that cannot be released is replaced all the same */ }
      el.textContent = "";
      el.removeAttribute("data-rendered");
      el.removeAttribute("data-error"); /* (a failed update's message goes with the drawing) */
      el.rgStarted = null;
      el.rgSettled = false;
      remaining += 1;
      queue.push(el);
      if (observer) observer.observe(el); /* in view (or scrolled to): asked for, as at load */
      else wanted.push(el);
    });
    if (entries.length) {
      delete root.dataset.chartsDone;
      delete root.dataset.allDone;
    }
  }
  function retheme(isDark) {
    if (isDark === dark) return;
    dark = isDark;
    /* (a chart still being set up is drawn again when it is done: render) */
    redraw(views.filter(function (e) { return e.dark !== dark && e.el.rgSettled; }));
    if (remaining === 0) done(); /* nothing to draw again (no chart, or none drawn): the theme is the page's now */
    else pump();
  }
  var scheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  if (scheme) {
    var onScheme = function (ev) { retheme(!!ev.matches); };
    if (scheme.addEventListener) scheme.addEventListener("change", onScheme);
    else if (scheme.addListener) scheme.addListener(onScheme); /* Safari before 14 */
  }

  /* controls: <select data-signal="name"> with JSON option values. A control of many options (render.LAZY_OPTIONS:
   * 1,024 ranks) holds only its default and the options findings name until it is used; the rest wait in its
   * data-options ([[value, label], ...]) and are added here, keeping the value chosen and the default. */
  function fill(sel) {
    var text = sel && sel.getAttribute ? sel.getAttribute("data-options") : null;
    if (!text) return sel;
    sel.removeAttribute("data-options");
    var list;
    try { list = JSON.parse(text); } catch (e) { return sel; }
    if (!Array.isArray(list)) return sel;
    var key = function (s) {
      try { return JSON.stringify(JSON.parse(s)); } catch (e) { return JSON.stringify(s); }
    };
    var current = key(sel.value), def = null, keep = null;
    Array.prototype.forEach.call(sel.options, function (o) { if (o.defaultSelected) def = key(o.value); });
    var frag = doc.createDocumentFragment();
    list.forEach(function (pair) {
      if (!Array.isArray(pair)) return;
      var o = doc.createElement("option"), k = JSON.stringify(pair[0]);
      o.value = k;
      o.textContent = String(pair[1]);
      if (k === def) o.defaultSelected = true;
      if (k === current) keep = o;
      frag.appendChild(o);
    });
    if (!keep) return sel; /* the value chosen is not in the list (cannot happen): keep the options as they are */
    sel.textContent = "";
    sel.appendChild(frag);
    sel.value = keep.value;
    return sel;
  }
  ["mousedown", "touchstart", "focusin", "keydown"].forEach(function (type) {
    doc.addEventListener(type, function (ev) {
      var t = ev.target;
      if (t && t.matches && t.matches("select[data-options]")) fill(t);
    }, { capture: true, passive: true });
  });
  function readControl(sel) {
    var value;
    try {
      value = JSON.parse(sel.value);
    } catch (e) {
      value = sel.value;
    }
    var section = sectionOf(sel);
    var name = sel.getAttribute("data-signal");
    (chosen[section] = chosen[section] || Object.create(null))[name] = value;
    return { section: section, name: name, value: value };
  }
  /* set one signal in every drawn chart of a section (or of one figure) that declares it */
  function broadcast(section, name, value, figure) {
    var jobs = [];
    views.forEach(function (entry) {
      if (!entry.names[name]) return;
      if (figure ? entry.figure !== figure : entry.section !== section) return;
      try {
        setSignal(entry, name, value);
        jobs.push(entry.view.runAsync().catch(function (err) {
          showError(entry.el, err, true);
        }));
      } catch (err) {
        showError(entry.el, err, true);
      }
    });
    return Promise.all(jobs);
  }
  Array.prototype.forEach.call(doc.querySelectorAll("select[data-signal]"), readControl);
  doc.addEventListener("change", function (ev) {
    var sel = ev.target;
    if (!sel || !sel.matches || !sel.matches("select[data-signal]")) return;
    var c = readControl(sel);
    broadcast(c.section, c.name, c.value);
  });

  /* Select the option of a section's control whose value is `value` (JSON-equal, or equal as text:
   * a chart's datum may hold the step 3 where the control offers "3"); then tell the charts. */
  function setControl(section, name, value) {
    var sec = doc.getElementById(section);
    if (!sec) return null;
    var sel = null;
    Array.prototype.forEach.call(sec.querySelectorAll("select[data-signal]"), function (s) {
      if (s.getAttribute("data-signal") === name) sel = s;
    });
    if (!sel) return null;
    fill(sel);
    var want = JSON.stringify(value);
    var opt = null;
    Array.prototype.forEach.call(sel.options, function (o) {
      var v;
      try { v = JSON.parse(o.value); } catch (e) { v = o.value; }
      if (!opt && JSON.stringify(v) === want) opt = o;
    });
    Array.prototype.forEach.call(sel.options, function (o) {
      var v;
      try { v = JSON.parse(o.value); } catch (e) { v = o.value; }
      if (!opt && typeof v !== "object" && typeof value !== "object" && String(v) === String(value)) opt = o;
    });
    if (!opt) return null;
    sel.value = opt.value;
    var c = readControl(sel);
    return broadcast(c.section, c.name, c.value);
  }

  /* usermeta.rg_click = {field, signal}: clicking a mark sets the section's control `signal` to
   * the clicked datum's `field` (the time overview's steps drive the Marey view). A list of them sets each. */
  function clickSets(entry, click) {
    if (Array.isArray(click)) { click.forEach(function (c) { clickSets(entry, c); }); return; }
    if (!click || typeof click.field !== "string" || typeof click.signal !== "string") return;
    entry.el.classList.add("rg-clickable");
    entry.view.addEventListener("click", function (ev, item) {
      var d = item && item.datum;
      if (!d || d[click.field] === undefined || d[click.field] === null) return;
      setControl(entry.section, click.signal, d[click.field]);
    });
  }

  /* a chart with the rank on an axis (x or y field "rank"): clicking a mark of rank N opens #rank-N (the rank
   * picker, see showRank), when the page has one and the chart is not the picker itself */
  function rankOnAxis(node) {
    if (!node || typeof node !== "object") return false;
    var enc = node.encoding || {};
    if ((enc.x && enc.x.field === "rank") || (enc.y && enc.y.field === "rank")) return true;
    return ["layer", "vconcat", "hconcat", "concat"].some(function (k) {
      return Array.isArray(node[k]) && node[k].some(rankOnAxis);
    }) || (node.spec ? rankOnAxis(node.spec) : false);
  }
  function clickRank(entry, spec) {
    if (entry.figure === "drill-rank-any" || !doc.getElementById("drill-rank-any") || !rankOnAxis(spec)) return;
    entry.el.classList.add("rg-clickable");
    entry.view.addEventListener("click", function (ev, item) {
      var d = item && item.datum, r = d ? d.rank : undefined;
      if (typeof r !== "number" || Math.floor(r) !== r || r < 0) return;
      if (window.history && history.pushState) history.pushState(null, "", "#rank-" + r);
      showRank("#rank-" + r);
    });
  }

  /* A finding's view: {figure, signals}. Signals with a control in the figure's section set the
   * control (and so every chart of the section); the others are pinned on the figure. Highlights
   * of earlier findings are cleared everywhere. */
  function showView(view, reset) {
    var fig = view && typeof view.figure === "string" ? doc.getElementById(view.figure) : null;
    if (!fig) return null;
    var section = sectionOf(fig);
    var signals = view.signals || {};
    var jobs = [];
    /* a finding's view is the state the finding was judged in: the section's other controls go back to their
     * defaults (a stage chosen by an earlier finding's view must not hide the ranks this one names) */
    var sec = reset ? doc.getElementById(section) : null;
    if (sec) Array.prototype.forEach.call(sec.querySelectorAll("select[data-signal]"), function (s) {
      var name = s.getAttribute("data-signal");
      if (Object.prototype.hasOwnProperty.call(signals, name)) return;
      var def = null;
      Array.prototype.forEach.call(s.options, function (o) { if (!def && o.defaultSelected) def = o; });
      def = def || s.options[0];
      if (!def || s.value === def.value) return;
      var value;
      try { value = JSON.parse(def.value); } catch (e) { value = def.value; }
      var job = setControl(section, name, value);
      if (job) jobs.push(job);
    });
    Object.keys(pinned).forEach(function (id) {
      FOCUS.forEach(function (n) { if (pinned[id][n] !== undefined) pinned[id][n] = []; });
    });
    views.forEach(function (entry) {
      FOCUS.forEach(function (n) {
        if (entry.names[n] && entry.figure !== fig.id) jobs.push(broadcast("", n, [], entry.figure));
      });
    });
    var mine = pinned[fig.id] = pinned[fig.id] || Object.create(null);
    Object.keys(signals).forEach(function (name) {
      var job = setControl(section, name, signals[name]);
      if (job) jobs.push(job);
      else mine[name] = signals[name];
    });
    if (view.row_match && window.reportgenTables) window.reportgenTables.showRows(fig.id, view.row_match);
    var chart = fig.querySelector(".rg-chart[data-spec]");
    if (chart) {
      jobs.push(render(chart).then(function () {
        var entry = null;
        views.forEach(function (e) { if (e.el === chart) entry = e; });
        return entry ? applyChosen(entry) : null;
      }));
    }
    Array.prototype.forEach.call(doc.querySelectorAll(".rg-target"), function (f) {
      f.classList.remove("rg-target");
    });
    fig.classList.add("rg-target");
    fig.scrollIntoView({ block: "start" });
    return Promise.all(jobs).then(function () {
      fig.scrollIntoView({ block: "start" }); /* charts drawn meanwhile may have moved it */
      clearSticky(fig);
      root.dataset.viewShown = fig.id;
    });
  }

  /* the section's sticky control bar never covers the top of the view just scrolled to */
  function clearSticky(el) {
    var sec = el.closest("section");
    var bar = sec ? sec.querySelector(".rg-controls") : null;
    if (!bar || bar.contains(el)) return;
    var under = bar.getBoundingClientRect().bottom + 8 - el.getBoundingClientRect().top;
    if (under > 0) window.scrollBy(0, -under);
  }
  function viewOf(link) {
    try {
      return JSON.parse(link.getAttribute("data-view"));
    } catch (e) {
      return null;
    }
  }
  /* the link of finding N is in <li id="finding-N">; #evidence-N opens its view (bookmarkable) */
  function evidenceLink(hash) {
    var m = /^#evidence-(\d+)$/.exec(hash || "");
    var item = m ? doc.getElementById("finding-" + m[1]) : null;
    return item ? item.querySelector("a[data-view]") : null;
  }
  doc.addEventListener("click", function (ev) {
    var link = ev.target && ev.target.closest ? ev.target.closest("a[data-view]") : null;
    if (!link || ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
    var view = viewOf(link);
    var item = link.closest("li[id^='finding-']");
    if (!view || !doc.getElementById(view.figure)) return; /* no such chart: the plain link */
    ev.preventDefault();
    delete root.dataset.viewShown;
    if (item && window.history && history.pushState) {
      history.pushState(null, "", "#evidence-" + item.id.slice("finding-".length));
    }
    showView(view, true);
  });
  /* #rank-N (a rank cell's link): set the rank picker (the control of signal drill_rank, figure drill-rank-any)
   * to rank N and show its figure */
  var PICKER = "drill-rank-any", PICK_SIGNAL = "drill_rank";
  function showRank(hash) {
    var m = /^#rank-(\d+)$/.exec(hash || "");
    var fig = m ? doc.getElementById(PICKER) : null;
    if (!fig) return false;
    var view = { figure: PICKER, signals: {} }, rank = Number(m[1]);
    view.signals[PICK_SIGNAL] = rank;
    /* a control cut to its first options (render.MAX_OPTIONS) gains the rank asked for */
    var sel = fill(doc.querySelector("select[data-signal='" + PICK_SIGNAL + "']"));
    if (sel && !Array.prototype.some.call(sel.options, function (o) { return o.value === String(rank); })) {
      var opt = doc.createElement("option");
      opt.value = String(rank);
      opt.textContent = "Rank " + rank;
      sel.appendChild(opt);
    }
    delete root.dataset.viewShown;
    showView(view);
    return true;
  }
  doc.addEventListener("click", function (ev) {
    var link = ev.target && ev.target.closest ? ev.target.closest("a[href^='#rank-']") : null;
    if (!link || ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
    if (!doc.getElementById(PICKER)) return;
    ev.preventDefault();
    if (window.history && history.pushState) history.pushState(null, "", link.getAttribute("href"));
    showRank(link.getAttribute("href"));
  });
  function fromHash() {
    if (showRank(window.location.hash)) return;
    var link = evidenceLink(window.location.hash);
    if (link) showView(viewOf(link), true);
  }
  window.addEventListener("popstate", fromHash);

  /* the rest, one per idle slice (pump) */
  var idle = window.requestIdleCallback
    ? function (fn) { window.requestIdleCallback(fn, { timeout: 1000 }); }
    : function (fn) { window.setTimeout(fn, 30); };
  var queue = charts.slice();
  /* the first screen first: the charts IntersectionObserver first reports in view (or near it) */
  function firstScreen(inView) {
    if (first !== null) return;
    first = inView.filter(function (el) { return !el.rgSettled; }); /* a finding's view may have drawn one */
    if (!first.length) ready();
    else ask(first);
  }
  if ("IntersectionObserver" in window && charts.length) {
    observer = new IntersectionObserver(function (entries) {
      var near = entries.filter(function (e) { return e.isIntersecting; }).map(function (e) { return e.target; });
      /* a chart scrolled past before its turn is no longer asked for (idle time draws it): the one scrolled to next
       * must not wait for it */
      var away = entries.filter(function (e) { return !e.isIntersecting; }).map(function (e) { return e.target; });
      if (away.length) wanted = wanted.filter(function (el) { return away.indexOf(el) < 0; });
      if (first === null) firstScreen(near);
      else ask(near); /* scrolled to (or near): pump draws the ones in the viewport first */
    }, { rootMargin: "200px 0px" });
    charts.forEach(function (el) { observer.observe(el); });
    /* a page that renders no frame (a background tab) gets no report: draw in idle time all the same */
    window.setTimeout(function () { firstScreen([]); }, 3000);
  } else {
    firstScreen(charts.slice());
  }

  if (!charts.length) { ready(); done(); }

  /* printing: draw everything and open the report's own collapsed <details> */
  var opened = [];
  window.addEventListener("beforeprint", function () {
    charts.forEach(render);
    Array.prototype.forEach.call(doc.querySelectorAll("details.rg-details:not([open]), details.rg-tree-node:not([open])"), function (d) {
      d.open = true;
      opened.push(d);
    });
  });
  window.addEventListener("afterprint", function () {
    opened.forEach(function (d) { d.open = false; });
    opened = [];
  });

  /* read-only, for tests and the console: the signal values a drawn figure declares */
  window.reportgenCharts = {
    /* the warnings and errors logged since the page opened: [{level, chart, text}] (chart: the spec last started) */
    logged: function () { return logged.map(function (m) { return { level: m.level, chart: m.chart, text: m.text }; }); },
    signals: function (figureId) {
      var out = null;
      views.forEach(function (e) {
        if (e.figure !== figureId) return;
        out = out || {};
        Object.keys(e.names).forEach(function (n) { out[n] = e.view.signal(n); });
      });
      return out;
    },
    /* the datasets of a spec (a copy is read) that would be partitioned: {dataset: {field, signal, keep}} */
    partitionsOf: function (spec) {
      var out = {}, parts = partitions(JSON.parse(JSON.stringify(spec)));
      Object.keys(parts).forEach(function (d) {
        var p = parts[d];
        out[d] = { field: p.field, signal: p.signal, keep: p.keep === undefined ? null : p.keep };
      });
      return out;
    },
    /* the datasets of a drawn figure given to Vega partitioned (see partitions): {dataset: {signal, field, rows}} */
    partitioned: function (figureId) {
      var out = null;
      views.forEach(function (e) {
        if (e.figure !== figureId) return;
        out = out || {};
        Object.keys(e.parts).forEach(function (d) {
          var p = e.parts[d];
          out[d] = { signal: p.signal, field: p.field, rows: e.view.data(d).length };
        });
      });
      return out;
    },
    /* the data of every drawn mark of a figure's chart (up to limit items): what the chart shows */
    marks: function (figureId, limit) {
      return dataMarks(function (e) { return e.figure === figureId; }, limit);
    },
    /* the same for one .rg-chart element (a finding's own chart too), SVG or canvas */
    marksOf: function (el, limit) {
      return dataMarks(function (e) { return e.el === el; }, limit);
    }
  };
  function dataMarks(which, limit) {
    var out = [], max = limit || 20000;
    function walk(node) {
      if (!node || out.length >= max) return;
      if (node.items) node.items.forEach(function (it) {
        if (out.length >= max) return;
        if (it.datum && it.mark && it.mark.marktype !== "group" && it.mark.role !== "axis-label" &&
            (it.mark.role || "").indexOf("axis") < 0 && (it.mark.role || "").indexOf("legend") < 0) out.push(it.datum);
        walk(it);
      });
    }
    views.forEach(function (e) { if (which(e)) walk(e.view.scenegraph().root); });
    return out;
  }

  fromHash();
})();
