// Names for what Django's admin widgets draw without one, for screen readers (WCAG 4.1.2):
// the box select2 draws over an autocomplete <select> (named after the select's label or
// aria-label), the search icon of a two-list picker (an image with a title), and Django's
// yes/no icons, whose alt text is the Python value ("True") in every language: they are named
// in the page's language (the words base_site.html gives).
// Rows added to an inline later are named as they appear.
"use strict";
(function () {
  function nameOf(select) {
    if (select.getAttribute("aria-label")) return select.getAttribute("aria-label");
    const label = select.id && document.querySelector('label[for="' + select.id + '"]');
    return label ? label.textContent.replace(/:\s*$/, "").trim() : "";
  }

  const iconWords = (function () {
    const words = document.getElementById("garante-icon-words");
    return words ? JSON.parse(words.textContent) : null;
  })();

  function nameAll(root) {
    if (iconWords) {
      root.querySelectorAll('img[src$="/icon-yes.svg"], img[src$="/icon-no.svg"], ' +
        'img[src$="/icon-unknown.svg"]').forEach(function (icon) {
        const kind = icon.getAttribute("src").match(/icon-(yes|no|unknown)\.svg$/)[1];
        if (icon.getAttribute("alt") !== iconWords[kind]) icon.setAttribute("alt", iconWords[kind]);
      });
    }
    root.querySelectorAll(".select2-selection__rendered[role=textbox]").forEach(function (box) {
      const container = box.closest(".select2-container");
      const select = container && container.previousElementSibling;
      if (select && select.tagName === "SELECT" && !box.getAttribute("aria-label")) {
        const name = nameOf(select);
        if (name) box.setAttribute("aria-label", name);
      }
    });
    root.querySelectorAll(".help-tooltip[aria-label]:not([role])").forEach(function (icon) {
      icon.setAttribute("role", "img");
    });
  }

  function start() {
    nameAll(document);
    new MutationObserver(function () { nameAll(document); }).observe(document.body, {
      childList: true, subtree: true,
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
