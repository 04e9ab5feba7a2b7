/* reportgen charts: draws every .rg-chart from its inert JSON spec with vegaEmbed.
 * Visible charts first (IntersectionObserver), the rest in idle slices, all of them before
 * printing. Page controls set Vega signals. Nothing here fetches anything; errors are
 * written as text, never as HTML. When every chart is done, <html data-charts-ready="1">. */
(function () {
  "use strict";
  var doc = document;
  var root = doc.documentElement;
  var charts = Array.prototype.slice.call(doc.querySelectorAll(".rg-chart[data-spec]"));
  var remaining = charts.length;
  var views = [];                  /* {el, view, section, names} of every drawn chart */
  var chosen = Object.create(null); /* section id -> {signal: value} picked with the controls */
  var dark = !!(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  var observer = null;

  function ready() {
    root.dataset.chartsReady = "1";
  }
  function settled() {
    remaining -= 1;
    if (remaining === 0) ready();
  }
  if (remaining === 0) ready();

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
      renderer: "svg",
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

  /* Apply control values chosen before this chart was drawn (or restored by the browser). */
  function applyChosen(entry) {
    var picked = chosen[entry.section];
    var changed = false;
    if (!picked) return Promise.resolve();
    Object.keys(picked).forEach(function (name) {
      if (!entry.names[name]) return;
      if (entry.view.signal(name) !== picked[name]) {
        entry.view.signal(name, picked[name]);
        changed = true;
      }
    });
    return changed ? entry.view.runAsync() : Promise.resolve();
  }

  function render(el) {
    if (el.rgStarted) return el.rgStarted;
    if (observer) observer.unobserve(el);
    var spec = null;
    el.rgStarted = new Promise(function (resolve) {
      var holder = doc.getElementById(el.getAttribute("data-spec") || "");
      if (!holder) throw new Error("its data is missing from the page");
      spec = JSON.parse(holder.textContent);
      if (typeof window.vegaEmbed !== "function") throw new Error("the chart library did not load");
      if (spec && spec.usermeta && spec.usermeta.embedOptions) delete spec.usermeta.embedOptions;
      resolve(window.vegaEmbed(el, spec, embedOptions(el)));
    }).then(function (result) {
      var entry = { el: el, view: result.view, section: sectionOf(el), names: declared(spec) };
      views.push(entry);
      return applyChosen(entry);
    }).then(function () {
      el.setAttribute("data-rendered", "1");
    }, function (err) {
      showError(el, err, false);
    }).then(settled);
    return el.rgStarted;
  }

  /* controls: <select data-signal="name"> with JSON option values */
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
  Array.prototype.forEach.call(doc.querySelectorAll("select[data-signal]"), readControl);
  doc.addEventListener("change", function (ev) {
    var sel = ev.target;
    if (!sel || !sel.matches || !sel.matches("select[data-signal]")) return;
    var c = readControl(sel);
    views.forEach(function (entry) {
      if (entry.section !== c.section || !entry.names[c.name]) return;
      try {
        entry.view.signal(c.name, c.value).runAsync().catch(function (err) {
          showError(entry.el, err, true);
        });
      } catch (err) {
        showError(entry.el, err, true);
      }
    });
  });

  /* visible first */
  if ("IntersectionObserver" in window) {
    observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) render(e.target);
      });
    }, { rootMargin: "400px 0px" });
    charts.forEach(function (el) { observer.observe(el); });
  }

  /* then the rest, one per idle slice */
  var idle = window.requestIdleCallback
    ? function (fn) { window.requestIdleCallback(fn, { timeout: 1500 }); }
    : function (fn) { window.setTimeout(fn, 30); };
  var queue = charts.slice();
  function next() {
    while (queue.length && queue[0].rgStarted) queue.shift();
    if (!queue.length) return;
    idle(function () {
      var el = queue.shift();
      if (el) render(el).then(next);
      else next();
    });
  }
  next();

  /* printing: draw everything and open the report's own collapsed <details> */
  var opened = [];
  window.addEventListener("beforeprint", function () {
    charts.forEach(render);
    Array.prototype.forEach.call(doc.querySelectorAll("details.rg-details:not([open])"), function (d) {
      d.open = true;
      opened.push(d);
    });
  });
  window.addEventListener("afterprint", function () {
    opened.forEach(function (d) { d.open = false; });
    opened = [];
  });
})();
