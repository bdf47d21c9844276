'use strict';
// The calendar's booking page: select2 (the admin's autocomplete) draws the customer box on
// the page's load event; its text part is a "textbox" for screen readers with no name of its
// own, so it gets the field's label as its name, once drawn.
window.addEventListener('load', function () {
    window.setTimeout(function () {
        const label = document.querySelector('label[for="id_contact"]');
        const name = label ? label.textContent.replace(/:\s*$/, '').trim() : 'contact';
        document.querySelectorAll('.select2-selection__rendered').forEach(function (box) {
            box.setAttribute('aria-label', name);
        });
    }, 0);
});
