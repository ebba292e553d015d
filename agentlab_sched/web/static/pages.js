// agentlab-sched web: live updates and the edit preview. The pages work without this file: it only
// reloads a page's content when the server says something changed (Server-Sent Events), and previews
// the next fires of an edited cron as you type. No inline script anywhere (the CSP forbids it).
"use strict";

(function () {
  var body = document.body;

  // Never under someone's typing (a filter, an edit, a comment): a refresh put off while a form field has
  // the focus, or that the person began typing during, is made when the focus leaves the form.
  var edits = 0, putOff = false;
  document.addEventListener("input", function () { edits++; }, true);
  document.addEventListener("focusout", function () { if (putOff) { putOff = false; changed(); } }, true);
  function typing() {
    var active = document.activeElement;
    return !!(active && active.form);
  }
  function putOffRefresh() {
    putOff = true;
    document.dispatchEvent(new Event("agentlab:put-off"));
  }

  function refresh() {
    // Fetch this very page again and swap its <main>: the server renders, this only replaces.
    if (typing()) return putOffRefresh();
    var before = edits;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        if (typing() || edits !== before) return putOffRefresh(); // began typing while it was fetched
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main) {
          main.replaceWith(document.importNode(fresh, true));
          setupPreview();
          document.dispatchEvent(new Event("agentlab:refreshed"));
        }
      })
      .catch(function () {});
  }

  var pending = null;
  function changed() {
    if (pending) return;
    pending = setTimeout(function () { pending = null; refresh(); }, 300);
  }

  var events = body.getAttribute("data-events");
  if (events && window.EventSource) {
    var source = new EventSource(events);
    source.addEventListener("change", changed);
    // Once listening (and after each reconnect): what changed between the page's render and now was
    // announced to nobody, so look once.
    source.addEventListener("open", changed);
  }

  function setupPreview() {
    var form = document.getElementById("edit");
    if (!form) return;
    var cron = form.querySelector("[name=cron]");
    var zone = form.querySelector("[name=timezone]");
    var out = document.getElementById("edit-preview");
    var url = form.getAttribute("data-preview");
    if (!cron || !zone || !out || !url) return;
    var timer = null;
    function show() {
      var q = "?cron=" + encodeURIComponent(cron.value) + "&timezone=" + encodeURIComponent(zone.value);
      fetch(url + q, { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          out.textContent = "";
          if (!data.ok) {
            var p = document.createElement("p");
            p.className = "error field-error";
            p.setAttribute("data-field", data.field || "");
            p.textContent = data.error;
            out.appendChild(p);
            return;
          }
          if (data.words) {
            var w = document.createElement("p");
            w.textContent = data.words;
            out.appendChild(w);
          }
          var list = document.createElement("ol");
          list.className = "preview-times";
          data.times.forEach(function (t) {
            var li = document.createElement("li");
            li.textContent = t.local + " (" + t.utc + " UTC)" + (t.note ? " — " + t.note : "");
            list.appendChild(li);
          });
          out.appendChild(list);
        })
        .catch(function () {});
    }
    function later() { clearTimeout(timer); timer = setTimeout(show, 200); }
    cron.addEventListener("input", later);
    zone.addEventListener("input", later);
    show();
  }
  function readerTimes() {
    // The reader's own time beside the schedule's: only the browser knows the reader's zone.
    var lang = document.documentElement.lang || undefined;
    document.querySelectorAll("time[data-reader]").forEach(function (t) {
      if (t.getAttribute("data-done")) return;
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d)) return;
      var span = document.createElement("small");
      span.className = "reader-time";
      span.textContent = " · " + d.toLocaleString(lang, { dateStyle: "short", timeStyle: "short" });
      t.after(span);
      t.setAttribute("data-done", "1");
    });
  }

  setupPreview();
  readerTimes();
  document.addEventListener("agentlab:refreshed", readerTimes);
})();
