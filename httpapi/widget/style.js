  // FONT is the font of the default look: the system's, with Simplified
  // Chinese fonts before the generic family; FONT_TC is the same with
  // Traditional Chinese fonts, for text in zh-TW.
  var FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, ' +
    '"PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", "Noto Sans CJK SC", sans-serif';
  var FONT_TC = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, ' +
    '"PingFang TC", "Microsoft JhengHei", "Noto Sans CJK TC", sans-serif';

  // addStyle puts STYLE, the widget's default look, into the page once: a
  // <style> element marked data-capacityd-style="name", first in the head,
  // so that the page's own rules come after it and win over its rules of
  // the same weight. Where the page's Content-Security-Policy refuses
  // inline styles, the element has no sheet, and a constructed style sheet
  // (which that policy does not govern) carries the rules. The widget's
  // script element with data-style="none" leaves the look to the page;
  // label names the widget in the console.
  function addStyle(name, label) {
    if (script && script.getAttribute('data-style') === 'none') { return; }
    if (document.querySelector('style[data-capacityd-style="' + name + '"]')) { return; }
    var el = document.createElement('style');
    el.setAttribute('data-capacityd-style', name);
    el.textContent = STYLE;
    var head = document.head || document.documentElement;
    head.insertBefore(el, head.firstChild);
    if (el.sheet || !('adoptedStyleSheets' in document)) { return; }
    try {
      var sheet = new CSSStyleSheet();
      sheet.replaceSync(STYLE);
      document.adoptedStyleSheets = document.adoptedStyleSheets.concat([sheet]);
    } catch (err) {
      console.warn('capacityd ' + label + ': the default style could not be added:', err);
    }
  }
