/*
 * capacityd note buttons. Include this script once; every element
 *   <div data-note="NOTE_ID"></div>
 * records one view of the note per page load and shows its views and
 * waters, with a "Water" button that records a water and shows the numbers
 * the server answers with. A click while a water is in flight does nothing.
 * No dependencies. window.capacitydNotes.scan() binds elements added later.
 */
(function () {
  'use strict';
  if (window.capacitydNotes) { return; }

  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src, location.href).origin : location.origin;
  var ID = /^[A-Za-z0-9_-]{1,128}$/;
  var notes = {}; // note id -> state shared by the elements of that note

  function url(id, what) {
    return base + '/v1/notes/' + encodeURIComponent(id) + '/' + what;
  }

  function call(id, method, what) {
    return fetch(url(id, what), { method: method, cache: 'no-store' }).then(function (r) {
      if (!r.ok) { throw new Error('HTTP ' + r.status); }
      return r.json();
    });
  }

  function plural(n, one, many) {
    return n + ' ' + (n === 1 ? one : many);
  }

  function render(st) {
    st.parts.forEach(function (p) {
      if (st.stats) {
        p.views.textContent = plural(st.stats.views, 'view', 'views');
        p.waters.textContent = plural(st.stats.waters, 'water', 'waters');
        p.root.setAttribute('data-note-views', String(st.stats.views));
        p.root.setAttribute('data-note-waters', String(st.stats.waters));
      }
      p.status.textContent = st.error ? 'Could not reach the server' : '';
      p.button.disabled = st.inflight;
      p.button.setAttribute('aria-busy', st.inflight ? 'true' : 'false');
    });
  }

  function update(st, promise) {
    return promise.then(function (stats) {
      st.stats = stats;
      st.error = false;
    }, function () {
      st.error = true;
    }).then(function () { render(st); });
  }

  function water(st) {
    if (st.inflight) { return; }
    st.inflight = true;
    render(st);
    update(st, call(st.id, 'POST', 'waters')).then(function () {
      st.inflight = false;
      render(st);
    });
  }

  function span(cls, text) {
    var s = document.createElement('span');
    s.className = cls;
    s.textContent = text;
    return s;
  }

  function bind(el) {
    var id = el.getAttribute('data-note');
    if (!id || !ID.test(id) || el.hasAttribute('data-note-bound')) { return; }
    el.setAttribute('data-note-bound', '');
    var st = notes[id];
    var first = !st;
    if (first) {
      st = notes[id] = { id: id, parts: [], stats: null, inflight: false, error: false };
    }
    var p = {
      root: el,
      views: span('note-views', '\u2026 views'),
      waters: span('note-waters', '\u2026 waters'),
      button: document.createElement('button'),
      status: span('note-status', '')
    };
    p.button.type = 'button';
    p.button.className = 'note-water';
    p.button.textContent = 'Water';
    p.button.addEventListener('click', function () { water(st); });
    var counts = span('note-counts', '');
    counts.setAttribute('aria-live', 'polite');
    counts.appendChild(p.views);
    counts.appendChild(document.createTextNode(' \u00b7 '));
    counts.appendChild(p.waters);
    p.status.setAttribute('role', 'status');
    el.textContent = '';
    el.appendChild(counts);
    el.appendChild(document.createTextNode(' '));
    el.appendChild(p.button);
    el.appendChild(p.status);
    st.parts.push(p);
    render(st);
    if (first) {
      // One view per note per page load; if it cannot be recorded, still
      // show the numbers.
      update(st, call(id, 'POST', 'views').catch(function () {
        return call(id, 'GET', 'stats');
      }));
    }
  }

  function scan(root) {
    var els = (root || document).querySelectorAll('[data-note]');
    Array.prototype.forEach.call(els, bind);
  }

  window.capacitydNotes = { scan: scan };
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', function () { scan(); });
  } else {
    scan();
  }
}());
