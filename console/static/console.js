// The console's own script: the organiser's time zone for the server's
// dates, selects that submit their form, and live numbers from the API's
// streams. No inline script is needed by any page (the content security
// policy allows none).
(function () {
  'use strict';

  // The server shows dates in the zone this cookie names.
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (tz && document.cookie.indexOf('capacityd_tz=' + tz) < 0) {
      document.cookie = 'capacityd_tz=' + tz + '; path=/console; max-age=31536000; samesite=lax';
    }
  } catch (e) { /* the configured zone is used */ }

  // <select data-autosubmit> submits its form when changed.
  function autosubmit(root) {
    root.querySelectorAll('select[data-autosubmit]').forEach(function (sel) {
      if (sel.dataset.bound) { return; }
      sel.dataset.bound = '1';
      sel.addEventListener('change', function () { sel.form.requestSubmit(); });
    });
  }

  // <form data-confirm="question"> asks before it is submitted.
  function confirms(root) {
    root.querySelectorAll('form[data-confirm]').forEach(function (form) {
      if (form.dataset.bound) { return; }
      form.dataset.bound = '1';
      form.addEventListener('submit', function (e) {
        if (!window.confirm(form.dataset.confirm)) { e.preventDefault(); }
      });
    });
  }

  // An element with data-stream="URL" and data-event="NAME" shows each
  // event's JSON fields in its [data-field="FIELD"] descendants, and
  // marks when it last did (data-updated, for people and tests alike).
  var streams = [];
  function live(root) {
    root.querySelectorAll('[data-stream]').forEach(function (el) {
      if (el.dataset.bound) { return; }
      el.dataset.bound = '1';
      var es = new EventSource(el.dataset.stream);
      streams.push(es);
      es.addEventListener(el.dataset.event || 'message', function (e) {
        var data;
        try { data = JSON.parse(e.data); } catch (err) { return; }
        el.querySelectorAll('[data-field]').forEach(function (f) {
          var v = data[f.dataset.field];
          if (v !== undefined && v !== null) { f.textContent = String(v); }
        });
        el.dataset.updated = String(Date.now());
        el.classList.remove('stale');
      });
      es.addEventListener('error', function () { el.classList.add('stale'); });
    });
  }

  function bind(root) { autosubmit(root); confirms(root); live(root); }
  document.addEventListener('DOMContentLoaded', function () { bind(document); });
  // Parts htmx swaps in are bound too.
  document.addEventListener('htmx:load', function (e) { bind(e.target); });
  window.addEventListener('pagehide', function () { streams.forEach(function (es) { es.close(); }); });
}());
