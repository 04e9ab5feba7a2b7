/* reportgen tables: sort (click or Enter on a header), filter, CSV download of all rows.
 * Sorting uses the raw values in data-sort (numbers numerically, empty cells last).
 * The CSV is built here from the table's JSON script tag, which holds every row. */
(function () {
  "use strict";
  var doc = document;
  var collator = window.Intl ? new Intl.Collator(undefined, { numeric: true, sensitivity: "base" }) : null;
  var NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;

  function keyOf(td) {
    if (!td) return "";
    var k = td.getAttribute("data-sort");
    return k === null ? td.textContent.trim() : k;
  }

  function compare(a, b) {
    var an = NUMBER.test(a), bn = NUMBER.test(b);
    if (an && bn) return Number(a) - Number(b);
    if (an !== bn) return an ? -1 : 1; /* numbers before text */
    if (collator) return collator.compare(a, b);
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function sortBy(th) {
    var table = th.closest("table");
    if (!table || !table.tBodies.length) return;
    var tbody = table.tBodies[0];
    var headers = th.parentNode.children;
    var idx = Array.prototype.indexOf.call(headers, th);
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    Array.prototype.forEach.call(headers, function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1;
    var rows = Array.prototype.map.call(tbody.rows, function (tr, i) {
      return { tr: tr, key: keyOf(tr.cells[idx]), i: i };
    });
    rows.sort(function (x, y) {
      var xe = x.key === "", ye = y.key === "";
      if (xe || ye) return xe && ye ? x.i - y.i : (xe ? 1 : -1); /* empty cells stay last */
      return compare(x.key, y.key) * sign || x.i - y.i;
    });
    var frag = doc.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(r.tr); });
    tbody.appendChild(frag);
  }

  function filter(input) {
    var table = doc.getElementById(input.getAttribute("data-filter-for") || "");
    if (!table || !table.tBodies.length) return;
    var terms = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) {
      var text = tr.textContent.toLowerCase();
      var hit = terms.every(function (t) { return text.indexOf(t) !== -1; });
      tr.hidden = !hit;
      total += 1;
      if (hit) shown += 1;
    });
    var count = input.parentNode.querySelector(".rg-filter-count");
    if (count) count.textContent = terms.length ? shown + " of " + total + " rows" : "";
  }

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

  function download(button) {
    var id = button.getAttribute("data-csv-for") || "";
    var holder = doc.getElementById(id + "-data");
    if (!holder) return;
    var data = JSON.parse(holder.textContent);
    var blob = new Blob(["\ufeff" + csvText(data)], { type: "text/csv;charset=utf-8" });
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

  doc.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!t || !t.closest) return;
    var csv = t.closest("button[data-csv-for]");
    if (csv) {
      download(csv);
      return;
    }
    var th = t.closest("table.rg-sortable thead th");
    if (th) sortBy(th);
  });
  /* headers hold a <button>, so Enter and Space already click; this covers a focused <th> */
  doc.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (ev.key === "Enter" && t && t.matches && t.matches("table.rg-sortable thead th")) {
      ev.preventDefault();
      sortBy(t);
    }
  });
  doc.addEventListener("input", function (ev) {
    var t = ev.target;
    if (t && t.matches && t.matches("input[data-filter-for]")) filter(t);
  });

  window.reportgenTables = { csvText: csvText, csvCell: csvCell };
})();
