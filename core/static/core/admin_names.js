// Names for what Django's admin widgets draw without one, for screen readers (WCAG 4.1.2):
// the box select2 draws over an autocomplete <select> (named after the select's label or
// aria-label), and the search icon of a two-list picker (an image with a title).
// Rows added to an inline later are named as they appear.
"use strict";
(function () {
  function nameOf(select) {
    if (select.getAttribute("aria-label")) return select.getAttribute("aria-label");
    const label = select.id && document.querySelector('label[for="' + select.id + '"]');
    return label ? label.textContent.replace(/:\s*$/, "").trim() : "";
  }

  function nameAll(root) {
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
