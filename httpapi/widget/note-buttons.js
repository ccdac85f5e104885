/*
 * capacityd note buttons. Include this script once, from the service:
 *   <script src="https://SERVICE/widget/note-buttons.js" async></script>
 * and every element
 *   <div data-note="NOTE_ID"></div>
 * records one view of the note per page load and shows its views and
 * waters, with a "Water" button that records a water and shows the numbers
 * the server answers with. A click while a water is in flight does nothing.
 *
 * Views and waters are writes: the service accepts them from a page of
 * any site, unless its CORS_ALLOWED_ORIGINS setting lists sites and not
 * this one. Then the buttons show the numbers without the Water button.
 *
 * Text is in English, Traditional Chinese (zh-TW) or Simplified Chinese
 * (zh-CN): the element's data-lang, else the nearest lang (the element's or
 * the page's), else the browser's language; the element's lang becomes the
 * language of its text. No dependencies.
 * window.capacitydNotes.scan() binds elements added later.
 *
 * The script brings a small default look (one <style> element, added once,
 * whose rules only match the classes capacityd-note and capacityd-note-*
 * it gives its elements), themed with the custom properties --capacityd-*;
 * data-style="none" on the script tag leaves it out. The visitor is never
 * shown a configuration mistake (a site the service does not let write, a
 * note it does not count): the buttons show what they can, and the reason
 * goes to the console. docs/widgets.md describes the look, its custom
 * properties and hooks, and every state.
 */
(function () {
  'use strict';
  if (window.capacitydNotes) { return; }

  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src, location.href).origin : location.origin;
  var ID = /^[A-Za-z0-9_-]{1,128}$/;
  var notes = {}; // note id -> state shared by the elements of that note

  var TEXT = {
    en: {
      views: function (n) { return n + (n === 1 ? ' view' : ' views'); },
      waters: function (n) { return n + (n === 1 ? ' water' : ' waters'); },
      pending: '\u2026',
      water: 'Water',
      unreachable: 'Could not reach the server',
      failed: 'Could not record it; try again later',
      limited: 'Too soon to water again; try again later'
    },
    'zh-TW': {
      views: function (n) { return n + ' 次瀏覽'; },
      waters: function (n) { return n + ' 次澆水'; },
      pending: '\u2026',
      water: '澆水',
      unreachable: '無法連線到伺服器',
      failed: '記錄失敗，請稍後再試',
      limited: '澆水太頻繁，請稍後再試'
    },
    'zh-CN': {
      views: function (n) { return n + ' 次浏览'; },
      waters: function (n) { return n + ' 次浇水'; },
      pending: '\u2026',
      water: '浇水',
      unreachable: '无法连接服务器',
      failed: '记录失败，请稍后再试',
      limited: '浇水太频繁，请稍后再试'
    }
  };

  // SAID are the errors the visitor is told about: the others are
  // mistakes of the site or the service's settings, told to the console.
  var SAID = { unreachable: true, failed: true, limited: true };
  // READ_ONLY are the errors after which no write can succeed: the Water
  // button is hidden.
  var READ_ONLY = { refused: true, unknown: true };
  // NONE stands for a number that could not be read.
  var NONE = '\u2014';

  // @include style.js

  // STYLE is the default look. Its rules match the classes capacityd-note
  // and capacityd-note-* only; every colour, the font, the size and the
  // corners come from a custom property, with the default after its name.
  // Text in zh-TW takes FONT_TC: a rule of the same weight (:where adds
  // none), after the first.
  var STYLE = [
    '.capacityd-note {',
    '  display: flex; flex-wrap: wrap; align-items: center; gap: .5em .75em;',
    '  font-family: var(--capacityd-font, ' + FONT + ');',
    '  font-size: var(--capacityd-note-font-size, var(--capacityd-font-size, 1rem));',
    '  line-height: 1.5;',
    '  color: var(--capacityd-text-color, #1d2433);',
    '}',
    '.capacityd-note:where(:lang(zh-TW)) { font-family: var(--capacityd-font, ' + FONT_TC + '); }',
    '.capacityd-note .capacityd-note-counts { font-variant-numeric: tabular-nums; }',
    '.capacityd-note .capacityd-note-water {',
    '  -webkit-appearance: none; appearance: none; box-sizing: border-box;',
    '  margin: 0; border: 0; padding: .4em 1em; border-radius: var(--capacityd-radius, .5em);',
    '  font: inherit; font-weight: 600; line-height: 1.25;',
    '  color: var(--capacityd-button-color, #ffffff);',
    '  background: var(--capacityd-button-background, #1570ef);',
    '  cursor: pointer;',
    '}',
    '.capacityd-note .capacityd-note-water:hover:not(:disabled) { filter: brightness(.92); }',
    '.capacityd-note .capacityd-note-water:focus-visible {',
    '  outline: 3px solid var(--capacityd-focus-color, #84caff); outline-offset: 2px;',
    '}',
    '.capacityd-note .capacityd-note-water:disabled { opacity: .6; cursor: progress; }',
    '.capacityd-note .capacityd-note-water[hidden] { display: none; }',
    '.capacityd-note .capacityd-note-status { font-size: .875em; color: var(--capacityd-muted-color, #5b6475); }'
  ].join('\n');

  // @include lang.js

  function url(id, what) {
    return base + '/v1/notes/' + encodeURIComponent(id) + '/' + what;
  }

  // call resolves with the JSON answer, or rejects with {status, code} for
  // an error answer and {network: true} when no answer could be read.
  function call(id, method, what) {
    return fetch(url(id, what), { method: method, cache: 'no-store' }).then(function (r) {
      if (r.ok) { return r.json(); }
      return r.json().catch(function () { return {}; }).then(function (body) {
        throw { status: r.status, code: body && body.error && body.error.code };
      });
    }, function () {
      throw { network: true };
    });
  }

  function render(st) {
    var readOnly = READ_ONLY[st.error] === true;
    st.parts.forEach(function (p) {
      var t = p.text;
      if (st.stats) {
        p.views.textContent = t.views(st.stats.views);
        p.waters.textContent = t.waters(st.stats.waters);
        p.root.setAttribute('data-note-views', String(st.stats.views));
        p.root.setAttribute('data-note-waters', String(st.stats.waters));
      } else if (st.error) {
        p.views.textContent = t.views(NONE);
        p.waters.textContent = t.waters(NONE);
      }
      p.status.textContent = SAID[st.error] ? t[st.error] : '';
      p.root.setAttribute('data-note-state', st.error || 'ok');
      p.button.disabled = st.inflight || readOnly;
      p.button.hidden = readOnly;
      p.button.setAttribute('aria-busy', st.inflight ? 'true' : 'false');
    });
  }

  // report tells the console, once per note and error, what went wrong:
  // for the site's developer, never shown to the visitor.
  function report(st, err, what) {
    if (!st.error || st.reported[st.error]) { return; }
    st.reported[st.error] = true;
    var note = 'note "' + st.id + '"';
    var prefix = 'capacityd note buttons: ';
    switch (st.error) {
    case 'refused':
      console.error(prefix + 'the service at ' + base + ' does not let this site (' + location.origin +
        ') record views and waters of ' + note + ': its CORS_ALLOWED_ORIGINS setting lists other sites. ' +
        'Add this site to it, or leave it empty to accept every site. The buttons show the numbers only.');
      break;
    case 'unknown':
      console.error(prefix + 'the service at ' + base + ' does not count ' + note + ' (404): it counts ' +
        'registered notes only. Register it (PUT /v1/notes/' + st.id + ' with an admin token), or check ' +
        'the data-note attribute. The buttons show ' + (st.stats ? 'the numbers only.' : 'no numbers.'));
      break;
    case 'unreachable':
      console.warn(prefix + 'could not reach the service at ' + base + ' for ' + note + '.');
      break;
    case 'failed':
      console.warn(prefix + 'the service at ' + base + ' answered ' + err.status +
        (err.code ? ' (' + err.code + ')' : '') + ' to a ' + what.replace(/s$/, '') + ' of ' + note + '.');
      break;
    }
  }

  // record posts a view or a water and shows the answer, or why there is
  // none.
  function record(st, what) {
    return call(st.id, 'POST', what).then(function (stats) {
      st.stats = stats;
      st.error = null;
    }, function (err) {
      return explain(st, err, what).then(function () { report(st, err, what); });
    }).then(function () { render(st); });
  }

  // explain sets st.error for a write that failed, and shows the numbers
  // when they can be read. From another site, a write the service refuses
  // for its origin cannot be told from an unreachable server by the write
  // alone (the refusal carries no CORS headers); a read, which every site
  // may make, tells them apart.
  // A 404 is a note the service does not count (its registered notes
  // mode), a 429 on a water one too soon after the last from this address.
  function explain(st, err, what) {
    return call(st.id, 'GET', 'stats').then(function (stats) {
      st.stats = stats;
      st.error = err.status === 403 || err.network ? 'refused' : refusal(err, what);
    }, function () {
      st.error = err.status === 403 ? 'refused' : (err.network ? 'unreachable' : refusal(err, what));
    });
  }

  function refusal(err, what) {
    if (err.status === 404) { return 'unknown'; }
    if (err.status === 429 && what === 'waters') { return 'limited'; }
    return 'failed';
  }

  function water(st) {
    if (st.inflight || READ_ONLY[st.error]) { return; }
    st.inflight = true;
    render(st);
    record(st, 'waters').then(function () {
      st.inflight = false;
      render(st);
    });
  }

  // span makes a span of class cls (and capacityd-cls, which the default
  // look matches).
  function span(cls, text) {
    var s = document.createElement('span');
    s.className = cls + ' capacityd-' + cls;
    s.textContent = text;
    return s;
  }

  function bind(el) {
    var id = el.getAttribute('data-note');
    if (el.hasAttribute('data-note-bound')) { return; }
    if (!id || !ID.test(id)) {
      if (!el.capacitydWarned) {
        el.capacitydWarned = true;
        console.warn('capacityd note buttons: data-note="' + id + '" is not a note id (1 to 128 letters, ' +
          'digits, _ and -); the element is left as it is.', el);
      }
      return;
    }
    el.setAttribute('data-note-bound', '');
    el.classList.add('capacityd-note');
    var st = notes[id];
    var first = !st;
    if (first) {
      st = notes[id] = { id: id, parts: [], stats: null, inflight: false, error: null, reported: {} };
    }
    var code = langOf(el);
    var t = TEXT[code];
    el.setAttribute('lang', code);
    var p = {
      root: el,
      text: t,
      views: span('note-views', t.pending),
      waters: span('note-waters', t.pending),
      button: document.createElement('button'),
      status: span('note-status', '')
    };
    p.button.type = 'button';
    p.button.className = 'note-water capacityd-note-water';
    p.button.textContent = t.water;
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
    el.appendChild(document.createTextNode(' '));
    el.appendChild(p.status);
    st.parts.push(p);
    render(st);
    if (first) {
      record(st, 'views'); // one view per note per page load
    }
  }

  function scan(root) {
    var els = (root || document).querySelectorAll('[data-note]');
    Array.prototype.forEach.call(els, bind);
  }

  window.capacitydNotes = { scan: scan };
  addStyle('note-buttons', 'note buttons');
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', function () { scan(); });
  } else {
    scan();
  }
}());
