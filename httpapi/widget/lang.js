  // langOf picks the language of an element's text: its data-lang, else
  // the nearest lang (the element's or the page's), else the browser's
  // language.
  function langOf(el) {
    var l = el.getAttribute('data-lang');
    if (!l) {
      var holder = el.closest('[lang]');
      l = holder ? holder.getAttribute('lang') : '';
    }
    if (!l) { l = (navigator.languages && navigator.languages[0]) || navigator.language || ''; }
    return textLang(l);
  }

  // textLang is the key of TEXT for a language tag, whatever its case and
  // separator (- or _): zh-TW for Chinese in the Traditional script (Hant)
  // or, with no script, of Taiwan, Hong Kong or Macao; zh-CN for any other
  // Chinese (zh alone, Hans, China, Singapore); en for anything else.
  function textLang(tag) {
    var parts = String(tag).toLowerCase().split(/[-_]/);
    if (parts[0] !== 'zh') { return 'en'; }
    var script = '';
    var region = '';
    // The subtags before the first extension or private use (a singleton).
    for (var i = 1; i < parts.length && parts[i].length > 1; i++) {
      if (/^[a-z]{4}$/.test(parts[i]) && !script && !region) { script = parts[i]; }
      if ((parts[i].length === 2 || /^[0-9]{3}$/.test(parts[i])) && !region) { region = parts[i]; }
    }
    if (script === 'hant') { return 'zh-TW'; }
    if (script === 'hans') { return 'zh-CN'; }
    return region === 'tw' || region === 'hk' || region === 'mo' ? 'zh-TW' : 'zh-CN';
  }
