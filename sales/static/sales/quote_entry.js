'use strict';
// The quote form's rows priced as staff type (sales/admin/quote_entry.py): the whole form is
// posted to the preview view, which reads only; its answer fills each row's unit price,
// stock and total, the totals below the rows and every problem at once. Without JavaScript
// the same problems come when the form is saved.
// The admin loads its form's scripts in the page's head: wait for the form.
window.addEventListener('DOMContentLoaded', () => {
    const form = document.getElementById('quote_form');
    if (form) {
        const previewUrl = new URL('preview/', window.location.href.split('?')[0]);
        const group = document.getElementById('lines-group');
        const totals = document.createElement('div');
        totals.id = 'quote-entry-totals';
        totals.setAttribute('aria-live', 'polite');
        const problems = document.createElement('ul');
        problems.className = 'errorlist nonfield';
        problems.id = 'quote-entry-problems';
        const sums = document.createElement('dl');
        totals.append(problems, sums);
        group.after(totals);

        const cell = (row, name) => row.querySelector('td.field-' + name + ' p, td.field-' + name + ' div.readonly');
        const rowProblems = (row) => {
            let list = row.querySelector('ul.quote-entry-row-problems');
            if (!list) {
                list = document.createElement('ul');
                list.className = 'errorlist quote-entry-row-problems';
                row.querySelector('td.field-product').appendChild(list);
            }
            return list;
        };
        const fill = (list, problems) => {
            list.replaceChildren(...problems.map((text) => {
                const item = document.createElement('li');
                item.textContent = text;
                return item;
            }));
        };

        const render = (answer) => {
            const seen = new Set();
            for (const row of answer.rows) {
                const tr = document.getElementById('lines-' + row.index);
                if (!tr) continue;
                seen.add(tr);
                for (const [name, key] of [['unit_price_shown', 'unit_price'], ['available_shown', 'available'], ['total_shown', 'total']]) {
                    const target = cell(tr, name);
                    if (target) target.textContent = row[key] === undefined ? '—' : String(row[key]);
                }
                fill(rowProblems(tr), row.problems);
            }
            for (const tr of group.querySelectorAll('tr.form-row')) {
                if (seen.has(tr)) continue;
                for (const name of ['unit_price_shown', 'available_shown', 'total_shown']) {
                    const target = cell(tr, name);
                    if (target) target.textContent = '—';
                }
                const list = tr.querySelector('ul.quote-entry-row-problems');
                if (list) list.replaceChildren();
            }
            fill(problems, answer.problems);
            // The labels come with the answer, in the staff member's language.
            sums.replaceChildren(...['subtotal', 'tax', 'total'].flatMap((key) => {
                const term = document.createElement('dt');
                term.textContent = answer.labels[key];
                const value = document.createElement('dd');
                value.dataset.total = key;
                value.textContent = answer[key];
                return [term, value];
            }));
        };

        let timer = null;
        let latest = 0;
        const refresh = () => {
            clearTimeout(timer);
            timer = setTimeout(() => {
                const asked = ++latest;
                fetch(previewUrl, {
                    method: 'POST',
                    body: new FormData(form),
                    credentials: 'same-origin',
                    headers: {'X-Requested-With': 'XMLHttpRequest'},
                }).then((response) => response.ok ? response.json() : null).then((answer) => {
                    // An older answer that arrives after a newer one is dropped.
                    if (answer && asked === latest) render(answer);
                }).catch(() => {});
            }, 200);
        };
        form.addEventListener('input', refresh);
        form.addEventListener('change', refresh);
        document.addEventListener('formset:added', refresh);
        document.addEventListener('formset:removed', refresh);
        // Django admin's autocomplete (select2) announces a choice through jQuery only.
        if (window.django && window.django.jQuery) {
            window.django.jQuery(form).on('select2:select select2:clear', refresh);
        }
        refresh();
    }
});
