/* reportgen tables: per-column filters, natural sort, a column picker, key columns kept in view, and CSV
 * downloads of the rows shown or of every row.
 *
 * The data is the table's JSON script tag (<div id=T> holds <script id=T-data>): every row at full precision,
 * in the section's order. The page lists the first rows of it; each <tr data-i> names its JSON row. Filters,
 * sorting and the CSVs work on the JSON values, never on the formatted cells. Numeric filters read numbers in
 * the unit of the column's header: a header cell's data-scale is what a raw value is divided by for display.
 * No HTML is ever built from strings here: text goes in with textContent only. */
(function () {
  "use strict";
  var doc = document;
  var collator = window.Intl ? new Intl.Collator(undefined, { numeric: true, sensitivity: "base" }) : null;
  var NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;
  var NUM = "([-+]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][-+]?\\d+)?)";
  var COMPARISON = new RegExp("^(<=|>=|<|>|==|=)?" + NUM + "$");
  var RANGE = new RegExp("^" + NUM + "(?:\\.\\.|–|-)" + NUM + "$");
  var SELECT_MAX = 24; /* a column with at most this many distinct values (that repeat) gets a <select> */
  var MIN_FILTER_ROWS = 4; /* smaller tables get no filter row */
  var PIN_SHARE = 0.4; /* key columns stay in view while they take at most this share of the box */
  var NUMBER_HELP = "Numbers in the header's unit: >5, <=2, 3-7 (inclusive) or 810.2 (as shown); " +
    "several conditions separated by spaces must all hold";
  var tables = {};

  /* fmt.number / fmt.cell (reportgen/fmt.py) for rows only the JSON holds: 4 significant digits, "–" for none */
  /* as reportgen/fmt.py: an exponent below 1e-4 (fmt.EXPONENT_BELOW), a time below the clock's resolution is 0
   * (fmt.CLOCK, in the kind's base unit) */
  var CLOCK = { ms: 1e-6, us: 1e-3 };
  function numberText(f, sig) {
    if (f === 0) return "0";
    if (Math.abs(f) < 1e-4) return f.toExponential(sig - 1).replace(/\.?0+e/, "e");
    var mag = Math.floor(Math.log10(Math.abs(f))), dec = Math.max(0, Math.min(20, sig - 1 - mag));
    var text = f.toLocaleString("en-US", { minimumFractionDigits: 0, maximumFractionDigits: dec });
    return text === "-0" ? "0" : text;
  }
  function cellText(v, kind, scale) {
    if (v === null || v === undefined) return "\u2013";
    if (typeof v !== "number" || !isFinite(v)) return String(v);
    if (kind === "int") return Math.floor(v) === v ? v.toLocaleString("en-US") : numberText(v, 4);
    if (kind === "rank") return Math.floor(v) === v ? String(v) : numberText(v, 4);
    if (CLOCK[kind] && Math.abs(v) < CLOCK[kind]) return "0";
    var f = v / scale;
    return numberText(f, kind === "ratio" && Math.abs(v) < 10 ? 3 : 4);
  }

  function empty(v) {
    return v === null || v === undefined || v === "" || v === "-" || v === "–";
  }

  function valueKey(v) {
    return empty(v) ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  }

  /* Raw values: empty last (whatever the direction is, see sortBy), numbers numerically before text,
   * text in natural order (group_name_2 before group_name_10). */
  function compare(a, b) {
    var an = typeof a === "number", bn = typeof b === "number";
    if (an && bn) return a - b;
    if (an !== bn) return an ? -1 : 1;
    var x = valueKey(a), y = valueKey(b);
    if (collator) return collator.compare(x, y);
    return x < y ? -1 : x > y ? 1 : 0;
  }

  /* ---------------------------------------------------------------- numeric filter expressions */

  function decimals(text) {
    var m = /\.(\d+)/.exec(text.replace(/[eE].*$/, ""));
    return m ? m[1].length : 0;
  }

  /* One condition -> predicate on the displayed number, or null when the text is not a condition. */
  function condition(term) {
    var m = RANGE.exec(term);
    if (m) {
      var lo = Math.min(Number(m[1]), Number(m[2])), hi = Math.max(Number(m[1]), Number(m[2]));
      return function (v) { return v >= lo && v <= hi; };
    }
    m = COMPARISON.exec(term);
    if (!m) return null;
    var x = Number(m[2]);
    switch (m[1]) {
      case "<": return function (v) { return v < x; };
      case "<=": return function (v) { return v <= x; };
      case ">": return function (v) { return v > x; };
      case ">=": return function (v) { return v >= x; };
      default: /* exact, as written: 810.2 matches what is shown as 810.2 */
        var tol = 0.5 * Math.pow(10, -decimals(m[2])) * (1 + 1e-9);
        return function (v) { return Math.abs(v - x) <= tol; };
    }
  }

  /* "" -> null (no filter); text -> predicate on the displayed number, or false when it does not parse. */
  function numberFilter(text) {
    var s = text.replace(/,/g, "").trim();
    if (!s) return null;
    s = s.replace(/(<=|>=|==|<|>|=)\s+/g, "$1").replace(/\s*(\.\.|–)\s*/g, "$1")
      .replace(/(\d)\s+-\s+(?=[-+.\d])/g, "$1-");
    var preds = s.split(/\s+/).map(condition);
    if (preds.some(function (p) { return p === null; })) return false;
    return function (v) { return preds.every(function (p) { return p(v); }); };
  }

  /* ---------------------------------------------------------------- one table */

  function Table(box, data) {
    this.box = box;
    this.data = data;
    this.table = box.querySelector("table.rg-sortable");
    this.scroll = box.querySelector(".rg-table-scroll");
    var labelRow = this.table.tHead.querySelector("tr.rg-label-row") || this.table.tHead.rows[0];
    this.ths = Array.prototype.slice.call(labelRow.cells);
    this.cols = Array.prototype.slice.call(this.table.querySelectorAll("colgroup col"));
    this.tbody = this.table.tBodies[0];
    /* the rows the page wrote (render._table_ctx: the first rows, formatted there), by JSON row; rows listed later
     * are made from the JSON (rowFor) and kept for when they are listed again */
    this.made = Object.create(null);
    var trs = Array.prototype.filter.call(this.tbody.rows, function (tr) { return tr.hasAttribute("data-i"); });
    trs.forEach(function (tr) { this.made[tr.getAttribute("data-i")] = tr; }, this);
    /* rows listed at once (thresholds.PAGE_TABLE_ROWS); "List more" lists this many more */
    this.step = Number(box.getAttribute("data-page")) || trs.length || 25;
    this.limit = Math.max(this.step, trs.length);
    this.listed = trs.length;
    this.order = data.rows.map(function (_, i) { return i; });
    this.match = data.rows.map(function () { return true; });
    this.filters = this.ths.map(function () { return null; });
    this.hidden = this.ths.map(function (th) { return th.getAttribute("data-priority") === "3"; });
    this.columns = this.ths.map(this.describe, this);
    this.count = box.querySelector(".rg-filter-count");
    this.table.classList.add("rg-live");
  }

  /* What a column holds, from its JSON values: numbers or text, and its distinct values (counted while there are
   * few enough for a <select>: a column with more gets a text or number box, so the scan stops counting them). */
  Table.prototype.describe = function (th, i) {
    var seen = new Map(), numeric = true, integer = true, blanks = 0, many = false;
    var rows = this.data.rows, n = rows.length;
    for (var r = 0; r < n; r += 1) {
      var v = rows[r][i];
      if (v === null || v === undefined || v === "" || v === "-" || v === "\u2013") { blanks += 1; continue; }
      if (typeof v !== "number") numeric = false;
      else if (integer && Math.floor(v) !== v) integer = false;
      if (many) { if (!numeric) break; continue; } /* text with too many values: nothing more to learn */
      var k = typeof v === "object" ? JSON.stringify(v) : String(v);
      var c = seen.get(k);
      if (c === undefined) {
        seen.set(k, { v: v, n: 1 });
        if (seen.size > SELECT_MAX) many = true;
      } else {
        c.n += 1;
      }
    }
    var values = [], counts = {};
    if (!many) {
      seen.forEach(function (c, k) { values.push(c.v); counts[k] = c.n; });
      values.sort(compare);
    }
    var distinct = many ? SELECT_MAX + 1 : values.length + (blanks ? 1 : 0);
    var kind = "none";
    if (distinct > 1) {
      if (!many && distinct <= SELECT_MAX && distinct < n && (!numeric || integer)) kind = "select";
      else kind = numeric ? "number" : "text";
    }
    return {
      label: this.data.columns[i], numeric: numeric && (many || values.length > 0), kind: kind, values: values,
      counts: counts, blanks: blanks, scale: Number(th.getAttribute("data-scale")) || 1,
      priority: th.getAttribute("data-priority") || "2", group: th.getAttribute("data-group") || "",
    };
  };

  /* DOM writes only: the caller lays the table out (layoutAll), so building many tables costs one layout */
  Table.prototype.build = function () {
    if (this.data.rows.length >= MIN_FILTER_ROWS && this.columns.some(function (c) { return c.kind !== "none"; })) {
      this.buildFilters();
    }
    this.buildTools();
    if (this.data.rows.length > this.limit) this.buildMore();
    this.showColumns(true);
    this.apply();
  };

  /* "List 25 more" under the table while more rows pass the filters than the page lists */
  Table.prototype.buildMore = function () {
    var self = this, more = doc.createElement("button");
    more.type = "button";
    more.className = "rg-button rg-list-more";
    more.addEventListener("click", function () {
      self.limit += self.step;
      self.list();
    });
    this.scroll.parentNode.insertBefore(more, this.scroll.nextSibling);
    this.more = more;
  };

  Table.prototype.buildFilters = function () {
    var self = this, tr = doc.createElement("tr");
    tr.className = "rg-filter-row";
    this.columns.forEach(function (c, i) {
      var td = doc.createElement("td"), control = null;
      if (c.kind === "select") {
        control = doc.createElement("select");
        var all = doc.createElement("option");
        all.value = "";
        all.textContent = "all";
        control.appendChild(all);
        c.values.forEach(function (v) {
          var o = doc.createElement("option"), k = valueKey(v);
          o.value = "=" + k;
          o.textContent = k + " (" + c.counts[k] + ")";
          control.appendChild(o);
        });
        if (c.blanks) {
          var b = doc.createElement("option");
          b.value = "=";
          b.textContent = "(empty) (" + c.blanks + ")";
          control.appendChild(b);
        }
        control.addEventListener("change", function () { self.setFilter(i, control); });
      } else if (c.kind !== "none") {
        control = doc.createElement("input");
        control.type = "search";
        control.autocomplete = "off";
        control.spellcheck = false;
        control.placeholder = c.kind === "number" ? ">5, 3-7" : "contains";
        control.title = c.kind === "number" ? NUMBER_HELP : "Rows whose " + c.label + " contains this text (~abc: " +
          "a, b and c in this order, e.g. ~mmv3 finds MatMulV3)";
        control.addEventListener("input", function () { self.setFilter(i, control); });
      }
      if (control) {
        var wrap = doc.createElement("div");
        wrap.className = "rg-filter-box";
        control.className = "rg-col-filter";
        control.setAttribute("aria-label", "Filter " + c.label);
        wrap.appendChild(control);
        td.appendChild(wrap);
      }
      tr.appendChild(td);
    });
    this.filterRow = tr;
    this.table.tHead.appendChild(tr);
  };

  /* a finding's table view: [[column index, value], ...] -> the column filters set to those values (the reader sees
   * them and can clear them) and the matching rows outlined; false when the table has no such filters */
  Table.prototype.showRows = function (pairs) {
    var self = this, set = 0;
    Array.prototype.forEach.call(this.tbody.querySelectorAll("tr.rg-row-focus"), function (tr) {
      tr.classList.remove("rg-row-focus");
    });
    pairs.forEach(function (p) {
      var i = p[0], v = p[1], c = self.columns[i];
      var cell = self.filterRow ? self.filterRow.cells[i] : null;
      var control = cell ? cell.querySelector(".rg-col-filter") : null;
      if (!c || !control) return;
      if (c.kind === "select") control.value = "=" + valueKey(v);
      else if (c.kind === "number") control.value = "=" + v;
      else control.value = String(v);
      self.setFilter(i, control);
      set += 1;
    });
    this.orderedRows().forEach(function (tr) {
      var row = self.data.rows[Number(tr.getAttribute("data-i"))];
      if (pairs.every(function (p) { return valueKey(row[p[0]]) === valueKey(p[1]); })) tr.classList.add("rg-row-focus");
    });
    return set > 0;
  };

  Table.prototype.setFilter = function (i, control) {
    var c = this.columns[i], text = control.value, pred = null;
    if (c.kind === "select") {
      if (text) {
        var want = text.slice(1);
        pred = function (v) { return valueKey(v) === want; };
      }
    } else if (c.kind === "number") {
      var f = numberFilter(text);
      control.setAttribute("aria-invalid", f === false ? "true" : "false");
      if (f) {
        pred = function (v) {
          return typeof v === "number" && f(Number((v / c.scale).toPrecision(12)));
        };
      }
    } else {
      var needle = text.trim().toLowerCase();
      if (needle.charAt(0) === "~" && needle.length > 1) {  // fuzzy: the letters in this order (~mmv3: MatMulV3)
        var sub = needle.slice(1);
        pred = function (v) {
          if (empty(v)) return false;
          var s = valueKey(v).toLowerCase(), j = 0;
          for (var k = 0; k < s.length && j < sub.length; k++) if (s.charAt(k) === sub.charAt(j)) j++;
          return j === sub.length;
        };
      } else if (needle && needle !== "~") {  // a lone ~ (the fuzzy filter being typed) filters nothing yet
        pred = function (v) { return !empty(v) && valueKey(v).toLowerCase().indexOf(needle) !== -1; };
      }
    }
    this.filters[i] = pred;
    this.apply();
  };

  Table.prototype.clearFilters = function () {
    if (this.filterRow) {
      Array.prototype.forEach.call(this.filterRow.querySelectorAll(".rg-col-filter"), function (el) {
        el.value = "";
        el.removeAttribute("aria-invalid");
      });
    }
    this.filters = this.filters.map(function () { return null; });
    this.apply();
  };

  Table.prototype.active = function () {
    return !!this.rankSet || this.filters.some(function (f) { return f; });
  };

  /* A section's rank-set control (a process group): keep the rows whose rank columns all hold a rank of the set;
   * null keeps every row. */
  Table.prototype.setRankSet = function (ranks) {
    var cols = [];
    this.ths.forEach(function (th, i) { if (th.getAttribute("data-kind") === "rank") cols.push(i); });
    if (!cols.length) return;
    if (ranks && ranks.length) {
      var set = {};
      ranks.forEach(function (r) { set[String(r)] = true; });
      this.rankSet = function (row) {
        return cols.every(function (i) { return empty(row[i]) || set[String(row[i])] === true; });
      };
    } else {
      this.rankSet = null;
    }
    this.apply();
  };

  /* Filter every JSON row, list the first rows that pass in the current order, count. */
  Table.prototype.apply = function () {
    var filters = this.filters, rows = this.data.rows, matched = 0, inSet = this.rankSet;
    this.match = rows.map(function (row) {
      var ok = (!inSet || inSet(row)) && filters.every(function (f, i) { return !f || f(row[i]); });
      if (ok) matched += 1;
      return ok;
    });
    this.matched = matched;
    this.list();
  };

  /* The page lists the first `limit` rows that pass the filters, in the current order (sorting and the filters
   * cover every row the JSON holds, not only the rows the page wrote); "List more" raises the limit. */
  Table.prototype.list = function () {
    var self = this, want = [];
    for (var p = 0; p < this.order.length && want.length < this.limit; p += 1) {
      if (this.match[this.order[p]]) want.push(this.order[p]);
    }
    this.orderedRows().forEach(function (tr) { self.tbody.removeChild(tr); });
    var frag = doc.createDocumentFragment();
    want.forEach(function (r, j) {
      var tr = self.rowFor(r);
      tr.hidden = false;
      tr.classList.toggle("rg-alt", j % 2 === 1);
      frag.appendChild(tr);
    });
    this.tbody.appendChild(frag);
    this.listed = want.length;
    var total = this.data.rows.length, active = this.active(), text;
    text = active ? this.matched + " of " + total + " rows" : total + (total === 1 ? " row" : " rows");
    if (this.listed < this.matched) text += " \u00b7 " + this.listed + " listed here";
    if (this.count) this.count.textContent = text;
    if (this.more) {
      var left = this.matched - this.listed;
      this.more.hidden = left <= 0;
      this.more.textContent = "List " + Math.min(this.step, left).toLocaleString("en-US") + " more";
      this.more.title = left > 0 ? left.toLocaleString("en-US") + " more rows pass the filters" : "";
    }
    if (this.clear) this.clear.hidden = !this.filters.some(function (f) { return f; });  /* the group control stays */
    this.box.classList.toggle("rg-filtered", active); /* print says that rows were filtered out */
    if (this.laid) this.layout(); /* rows listed now get the key columns pinned too */
  };

  /* JSON row r as a table row: the page's own row when it wrote one, else made here like the page's cells
   * (render._table_ctx: 4 significant digits in the header's unit; rank cells link to the rank's detail). */
  Table.prototype.rowFor = function (r) {
    var key = String(r), made = this.made[key];
    if (made) return made;
    var self = this, tr = doc.createElement("tr");
    tr.setAttribute("data-i", key);
    this.data.rows[r].forEach(function (v, i) {
      var td = doc.createElement("td"), th = self.ths[i], kind = th ? th.getAttribute("data-kind") : "text";
      td.className = kind === "text" ? "rg-col-text" : "rg-col-num";
      if (kind !== "text") td.setAttribute("data-kind", kind);
      var text = cellText(v, kind, Number(th && th.getAttribute("data-scale")) || 1);
      var whole = kind === "rank" && typeof v === "number" && Math.floor(v) === v;
      var target = !whole ? "" : doc.getElementById("drill-rank-any") ? "#rank-" + v
        : doc.getElementById("drill-rank-" + v) ? "#drill-rank-" + v : "";
      if (target) {
        var a = doc.createElement("a"); /* the rank picker's link (charts.js: #rank-N sets the picker) */
        a.href = target;
        if (target.indexOf("#rank-") === 0) a.className = "rg-rank-link";
        a.textContent = text;
        td.appendChild(a);
      } else {
        td.textContent = text;
      }
      tr.appendChild(td);
    });
    this.made[key] = tr;
    return tr;
  };

  Table.prototype.orderedRows = function () {
    return Array.prototype.filter.call(this.tbody.rows, function (tr) { return tr.hasAttribute("data-i"); });
  };

  Table.prototype.sortBy = function (th) {
    var idx = this.ths.indexOf(th);
    if (idx < 0) return;
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    this.ths.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1, rows = this.data.rows;
    this.order.sort(function (x, y) {
      var a = rows[x][idx], b = rows[y][idx], ae = empty(a), be = empty(b);
      if (ae || be) return ae && be ? x - y : (ae ? 1 : -1); /* empty cells stay last */
      return compare(a, b) * sign || x - y;
    });
    this.list();
  };

  /* ---------------------------------------------------------------- columns: picker, hiding, key columns */

  Table.prototype.buildTools = function () {
    var self = this, tools = this.box.querySelector(".rg-table-tools");
    if (!tools) return;
    var clear = doc.createElement("button");
    clear.type = "button";
    clear.className = "rg-button rg-filter-clear";
    clear.textContent = "Clear filters";
    clear.hidden = true;
    clear.addEventListener("click", function () { self.clearFilters(); });
    tools.insertBefore(clear, this.count ? this.count.nextSibling : tools.firstChild);
    this.clear = clear;
    var optional = this.columns.some(function (c) { return c.priority === "3"; });
    if (this.columns.length < 8 && !optional) return;

    var details = doc.createElement("details"), summary = doc.createElement("summary");
    details.className = "rg-colpick";
    summary.className = "rg-button";
    details.appendChild(summary);
    /* the panel (a checkbox per column) is made when the picker is first opened */
    var made = false;
    function make() {
      if (made) return;
      made = true;
      self.buildPicker(details);
    }
    summary.addEventListener("click", make); /* before it opens (a click, Enter or Space on the summary) */
    details.addEventListener("toggle", function () { if (details.open) make(); });
    tools.insertBefore(details, tools.querySelector(".rg-csv"));
    this.picker = summary;
  };

  Table.prototype.buildPicker = function (details) {
    var self = this;
    var panel = doc.createElement("div");
    panel.className = "rg-colpick-panel";
    panel.setAttribute("role", "group");
    panel.setAttribute("aria-label", "Columns to show");
    details.appendChild(panel);
    var bar = doc.createElement("div");
    bar.className = "rg-colpick-bar";
    [["Show all", function () { return false; }],
     ["Key columns only", function (c) { return c.priority !== "1"; }]].forEach(function (b) {
      var btn = doc.createElement("button");
      btn.type = "button";
      btn.className = "rg-button";
      btn.textContent = b[0];
      btn.addEventListener("click", function () {
        self.hidden = self.columns.map(b[1]);
        self.showColumns();
      });
      bar.appendChild(btn);
    });
    panel.appendChild(bar);
    this.boxes = [];
    var groupBox = null, group = null;
    this.columns.forEach(function (c, i) {
      if (!groupBox || c.group !== group) {
        group = c.group;
        groupBox = doc.createElement("fieldset");
        var legend = doc.createElement("legend");
        legend.textContent = group || (c.priority === "1" ? "Key" : "Columns");
        groupBox.appendChild(legend);
        panel.appendChild(groupBox);
      }
      var label = doc.createElement("label"), box = doc.createElement("input");
      box.type = "checkbox";
      box.disabled = c.priority === "1";
      if (box.disabled) label.title = "A key column: it identifies the row";
      box.addEventListener("change", function () {
        self.hidden[i] = !box.checked;
        self.showColumns();
      });
      label.appendChild(box);
      label.appendChild(doc.createTextNode(" " + c.label));
      groupBox.appendChild(label);
      self.boxes[i] = box;
    });
    this.showColumns(true);
  };

  Table.prototype.showColumns = function (noLayout) {
    var hidden = this.hidden, shown = 0;
    this.cols.forEach(function (col, i) {
      col.style.visibility = hidden[i] ? "collapse" : "";
      if (!hidden[i]) shown += 1;
    });
    /* a collapsed column still paints positioned content (the sort button): hide it with the column */
    this.ths.forEach(function (th, i) { th.classList.toggle("rg-col-off", hidden[i]); });
    if (this.boxes) this.boxes.forEach(function (b, i) { b.checked = !hidden[i]; });
    if (this.picker) {
      this.picker.textContent = "Columns " + shown + " of " + this.cols.length;
      this.picker.title = shown < this.cols.length ? "Some columns are hidden on screen (all are printed)" : "";
    }
    if (!noLayout) this.layout();
  };

  /* Key columns (leading, data-priority=1) stay in view while the table scrolls sideways. Three passes so that
   * laying out many tables reads the layout once: unpin (writes), measure (reads), pin (writes). */
  Table.prototype.layout = function () {
    layoutAll([this]);
  };
  function layoutAll(list) {
    list.forEach(function (t) { t.unpin(); });
    var sizes = list.map(function (t) { return t.measure(); });
    list.forEach(function (t, i) { t.pin(sizes[i]); });
  }
  Table.prototype.unpin = function () {
    Array.prototype.forEach.call(this.table.querySelectorAll(".rg-pin"), function (el) {
      el.classList.remove("rg-pin", "rg-pin-last");
      el.style.left = "";
    });
  };
  Table.prototype.measure = function () {
    var scroll = this.scroll, m = { wide: scroll.scrollWidth > scroll.clientWidth + 1, widths: [] };
    m.more = scroll.scrollLeft + scroll.clientWidth < scroll.scrollWidth - 2;
    m.limit = scroll.clientWidth * PIN_SHARE;
    if (!m.wide) return m;
    for (var k = 0; k < this.ths.length && this.columns[k].priority === "1"; k++) {
      m.widths.push(this.ths[k].getBoundingClientRect().width);
    }
    return m;
  };
  Table.prototype.pin = function (m) {
    var self = this, scroll = this.scroll;
    this.laid = true;
    scroll.classList.toggle("rg-wide", m.wide);
    scroll.classList.toggle("rg-more-right", m.more);
    if (!m.wide) return;
    var left = 0, last = null;
    for (var k = 0; k < m.widths.length; k++) {
      var w = m.widths[k];
      if (left + w > m.limit) break;
      var cells = [];
      Array.prototype.forEach.call(this.table.rows, function (tr) {
        if (tr.classList.contains("rg-group-row")) return;
        if (tr.cells.length === self.ths.length) cells.push(tr.cells[k]);
      });
      cells.forEach(function (c) {
        c.classList.add("rg-pin");
        c.style.left = left + "px";
      });
      last = cells;
      left += w;
    }
    if (last) last.forEach(function (c) { c.classList.add("rg-pin-last"); });
  };

  /* A fade on the right edge while more columns lie beyond it. */
  Table.prototype.edges = function () {
    var s = this.scroll;
    s.classList.toggle("rg-more-right", s.scrollLeft + s.clientWidth < s.scrollWidth - 2);
  };

  /* ---------------------------------------------------------------- CSV */

  /* One CSV field. Text that a spreadsheet would run as a formula gets a leading quote. */
  function csvCell(v) {
    var s;
    if (v === null || v === undefined) return "";
    if (typeof v === "number" || typeof v === "boolean") {
      s = String(v);
    } else {
      s = typeof v === "object" ? JSON.stringify(v) : String(v);
      if (/^[=+\-@\t\r]/.test(s) && !NUMBER.test(s)) s = "'" + s;
    }
    if (/[",\r\n]/.test(s)) s = "\"" + s.replace(/"/g, "\"\"") + "\"";
    return s;
  }

  function csvText(data) {
    var lines = [data.columns.map(csvCell).join(",")];
    data.rows.forEach(function (row) { lines.push(row.map(csvCell).join(",")); });
    return lines.join("\r\n") + "\r\n";
  }

  /* {columns, rows} of what the CSV holds: "all" = every row and column in the section's order;
   * "shown" = the rows that pass the filters, in the order on screen, with the columns on screen. */
  Table.prototype.csvData = function (which) {
    var data = this.data;
    if (which === "all") return { columns: data.columns, rows: data.rows };
    var keep = [], match = this.match, hidden = this.hidden;
    data.columns.forEach(function (_, i) { if (!hidden[i]) keep.push(i); });
    var pick = function (row) { return keep.map(function (i) { return row[i]; }); };
    return {
      columns: pick(data.columns),
      rows: this.order.filter(function (r) { return match[r]; }).map(function (r) { return pick(data.rows[r]); }),
    };
  };

  function download(button) {
    var t = get(button.getAttribute("data-csv-for") || "");
    if (!t) return;
    var text = csvText(t.csvData(button.getAttribute("data-csv-rows") || "all"));
    var blob = new Blob(["\ufeff" + text], { type: "text/csv;charset=utf-8" });
    var url = URL.createObjectURL(blob);
    var a = doc.createElement("a");
    a.href = url;
    a.download = button.getAttribute("data-csv-name") || "table.csv";
    a.hidden = true;
    doc.body.appendChild(a);
    a.click();
    a.remove();
    window.setTimeout(function () { URL.revokeObjectURL(url); }, 5000);
  }

  /* ---------------------------------------------------------------- wiring */

  /* Tables are built (filters, picker, pinned key columns) in the first screen at once, then in idle slices, the ones
   * scrolled near first; a table used before that (sorted, downloaded) is built first. When every
   * table is built: <html data-tables-done="1"> (and data-all-done="1" once charts.js has drawn every chart). */
  var boxes = [], waiting = Object.create(null), observer = null, root = doc.documentElement;

  function make(box) {
    if (!waiting[box.id]) return null;
    delete waiting[box.id];
    if (observer) observer.unobserve(box);
    var t = new Table(box, JSON.parse(doc.getElementById(box.id + "-data").textContent));
    tables[box.id] = t;
    t.build();
    t.scroll.addEventListener("scroll", function () { t.edges(); }, { passive: true });
    var chosen = rankSetOf(box.closest("section"));
    if (chosen) t.setRankSet(chosen);
    return t;
  }
  /* The ranks a section's rank-set control (data-rank-set) chose, or null (none, or "all"). */
  function rankSetOf(section) {
    var sel = section && section.querySelector("select[data-rank-set]");
    if (!sel) return null;
    var v;
    try { v = JSON.parse(sel.value); } catch (e) { return null; }
    return Array.isArray(v) ? v : null;
  }
  doc.addEventListener("change", function (ev) {
    var sel = ev.target;
    if (!sel || !sel.matches || !sel.matches("select[data-rank-set]")) return;
    var section = sel.closest("section"), ranks = rankSetOf(section);
    Object.keys(tables).forEach(function (id) {
      var t = tables[id];
      if (t.box.closest("section") === section) t.setRankSet(ranks);
    });
  });
  function laidOut(built) {
    if (built.length) layoutAll(built);
    if (!Object.keys(waiting).length && root.dataset.tablesDone !== "1") {
      root.dataset.tablesDone = "1";
      if (root.dataset.chartsDone === "1") root.dataset.allDone = "1";
    }
  }
  function buildAll(list) {
    laidOut(list.map(make).filter(Boolean));
  }

  function get(id) {
    if (waiting[id]) buildAll([doc.getElementById(id)]);
    return tables[id] || null;
  }

  function tableOf(el) {
    var box = el.closest(".rg-table");
    return box ? get(box.id) : null;
  }

  function init() {
    Array.prototype.forEach.call(doc.querySelectorAll(".rg-table"), function (box) {
      if (!box.id || !doc.getElementById(box.id + "-data") || !box.querySelector("table.rg-sortable")) return;
      waiting[box.id] = true;
      boxes.push(box);
    });
    var reach = (window.innerHeight || 1000) + 400; /* one layout to read, then one to lay the built tables out */
    buildAll(boxes.filter(function (box) {
      var r = box.getBoundingClientRect();
      return r.bottom > -400 && r.top < reach;
    }));
    if ("IntersectionObserver" in window) {
      /* the ones scrolled near are built first, in the next idle slice: not in the frame that shows the scroll, where
       * a chart scrolled to is drawing (their rows are on the page already; a table used is built at once: get) */
      observer = new IntersectionObserver(function (entries) {
        var near = entries.filter(function (e) { return e.isIntersecting && waiting[e.target.id]; })
          .map(function (e) { return e.target; });
        if (!near.length) return;
        boxes = near.concat(boxes.filter(function (box) { return near.indexOf(box) < 0; }));
      }, { rootMargin: "600px 0px" });
      boxes.forEach(function (box) { if (waiting[box.id]) observer.observe(box); });
    }
    var idle = window.requestIdleCallback
      ? function (fn) { window.requestIdleCallback(fn, { timeout: 1000 }); }
      : function (fn) { window.setTimeout(function () { fn(null); }, 30); };
    /* none started within 200 ms of a scroll: the chart scrolled to (charts.js) goes first */
    var scrolled = 0;
    window.addEventListener("scroll", function () { scrolled = Date.now(); }, { passive: true });
    function slice(deadline) {
      if (Date.now() - scrolled < 200) {
        window.setTimeout(function () { idle(slice); }, 200);
        return;
      }
      var built = [];
      while (boxes.length && (!built.length || (deadline && deadline.timeRemaining() > 8))) {
        var t = make(boxes.shift());
        if (t) built.push(t);
      }
      laidOut(built);
      if (boxes.length) idle(slice);
    }
    idle(slice);
  }

  doc.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!t || !t.closest) return;
    var csv = t.closest("button[data-csv-for]");
    if (csv) {
      download(csv);
      return;
    }
    var th = t.closest("table.rg-sortable thead tr.rg-label-row th");
    var table = th && tableOf(th);
    if (table) table.sortBy(th);
  });
  /* headers hold a <button>, so Enter and Space already click; this covers a focused <th> */
  doc.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (ev.key === "Enter" && t && t.matches && t.matches("table.rg-sortable thead tr.rg-label-row th")) {
      var table = tableOf(t);
      if (table) {
        ev.preventDefault();
        table.sortBy(t);
      }
    }
  });
  var pending = false;
  window.addEventListener("resize", function () {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      layoutAll(Object.keys(tables).map(function (id) { return tables[id]; }));
    });
  });

  init();
  window.reportgenTables = {
    csvText: csvText, csvCell: csvCell, numberFilter: numberFilter, compare: compare,
    csv: function (id, which) { var t = get(id); return t ? csvText(t.csvData(which || "shown")) : null; },
    showRows: function (id, pairs) { var t = get(id); return t ? t.showRows(pairs) : false; },
  };
})();
