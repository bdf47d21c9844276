"""Every string the code marks for translation has its translation in a catalogue.

Customer-facing strings are written in Spanish and translated in locale/en; admin strings are
written in English and translated in locale/es. A msgid the catalogues lack is shown in its
source language whatever the company's language (verification codes once went out in Spanish
to English companies: `gettext as _g` was never extracted). The strings are extracted the way
`makemessages` does (xgettext, templates through Django's templatize), into a temporary
directory, with every alias the code gives a gettext function as a keyword; the catalogues are
read as the runtime reads them (compiled by msgfmt: fuzzy, untranslated and obsolete entries
do not count).
"""

import ast
import gettext
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import translation
from django.utils.translation.template import templatize

pytestmark = pytest.mark.skipif(
    not (shutil.which("xgettext") and shutil.which("msgfmt")), reason="needs GNU gettext"
)

ROOT = Path(settings.BASE_DIR)
LOCALE = ROOT / "locale"
# What `makemessages --ignore=.venv --ignore=tests` leaves out (plus hidden directories), and
# var/, what runs leave behind: `make mutate`'s copies of the tree hold mutated strings.
IGNORED_DIRECTORIES = {".venv", "tests", "node_modules", "__pycache__", "var"}
TEMPLATE_SUFFIXES = {".html", ".txt"}

# xgettext keyword specs of django.utils.translation's functions (as makemessages passes them).
KEYWORD_SPECS = {
    "gettext": "",
    "gettext_lazy": "",
    "gettext_noop": "",
    "ngettext": ":1,2",
    "ngettext_lazy": ":1,2",
    "pgettext": ":1c,2",
    "pgettext_lazy": ":1c,2",
    "npgettext": ":1c,2,3",
    "npgettext_lazy": ":1c,2,3",
}
CONTEXT_SEPARATOR = "\x04"


def _source_files() -> tuple[list[Path], list[Path]]:
    python, templates = [], []
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if any(part in IGNORED_DIRECTORIES or part.startswith(".") for part in parts[:-1]):
            continue
        if path.suffix == ".py":
            python.append(path)
        elif path.suffix in TEMPLATE_SUFFIXES and "templates" in parts:
            templates.append(path)
    return python, templates


def _keywords(python_files: list[Path]) -> set[str]:
    """xgettext --keyword options: Django's functions under their own names and under every
    alias the code imports them as (`from django.utils.translation import gettext as _g`)."""
    keywords = {f"{name}{spec}" for name, spec in KEYWORD_SPECS.items()} | {"_"}
    for path in python_files:
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "django.utils.translation":
                for alias in node.names:
                    if alias.name in KEYWORD_SPECS and alias.asname:
                        keywords.add(f"{alias.asname}{KEYWORD_SPECS[alias.name]}")
    return keywords


def _po_string(lines: list[str]) -> str:
    # A PO string is a C string literal split over lines; Python reads its escapes alike.
    return "".join(ast.literal_eval(line) for line in lines)


def _pot_keys(pot: Path) -> dict[str, str]:
    """msgid (prefixed by its msgctxt and \\x04, as in a compiled catalogue) -> where used."""
    keys: dict[str, str] = {}
    entry: dict[str, list[str]] = {}
    field = ""
    where = ""

    def flush() -> None:
        if entry.get("msgid") and _po_string(entry["msgid"]):
            msgid = _po_string(entry["msgid"])
            if "msgctxt" in entry:
                msgid = _po_string(entry["msgctxt"]) + CONTEXT_SEPARATOR + msgid
            keys[msgid] = where
        entry.clear()

    for line in [*pot.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip():
            flush()
            where, field = "", ""
        elif line.startswith("#:"):
            where = where or line[2:].strip()
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            entry.setdefault(field, []).append(line)
        else:
            field, _space, value = line.partition(" ")
            if field in ("msgctxt", "msgid", "msgid_plural") or field.startswith("msgstr"):
                entry[field] = [value]
    return keys


def _extract(tmp: Path) -> dict[str, str]:
    python_files, templates = _source_files()
    sources = [str(path.relative_to(ROOT)) for path in python_files]
    for template in templates:
        # As makemessages does: the template turned into Python-like text for xgettext.
        relative = template.relative_to(ROOT)
        target = tmp / "templates" / f"{relative}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(templatize(template.read_text(encoding="utf-8"), origin=str(template)))
        sources.append(str(target))
    file_list = tmp / "files.txt"
    file_list.write_text("\n".join(sources) + "\n", encoding="utf-8")
    pot = tmp / "django.pot"
    subprocess.run(
        [
            "xgettext",
            "--language=Python",
            "--from-code=UTF-8",
            "--no-wrap",
            "--sort-output",
            f"--files-from={file_list}",
            f"--output={pot}",
            *(f"--keyword={keyword}" for keyword in sorted(_keywords(python_files))),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return _pot_keys(pot)


def _translated(language: str, tmp: Path) -> dict:
    """The catalogue's translations as the runtime sees them (msgfmt drops fuzzy, empty and
    obsolete entries; --check also refuses a broken format string)."""
    compiled = tmp / f"{language}.mo"
    subprocess.run(
        [
            "msgfmt",
            "--check",
            "-o",
            str(compiled),
            str(LOCALE / language / "LC_MESSAGES" / "django.po"),
        ],
        check=True,
        capture_output=True,
    )
    with compiled.open("rb") as handle:
        catalog = gettext.GNUTranslations(handle)._catalog
    return {key[0] if isinstance(key, tuple) else key: text for key, text in catalog.items()}


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> dict[str, str]:
    return _extract(tmp_path_factory.mktemp("messages"))


@pytest.fixture(scope="module")
def catalogues(tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("catalogues")
    return {language: _translated(language, tmp) for language in ("en", "es")}


def test_the_extraction_sees_every_kind_of_marked_string(extracted):
    """Guards the guard: a string under the `_g` alias, a lazy one, and one in a template."""
    assert "Su código de verificación de %(company)s" in extracted
    assert "Esa franja ya está ocupada." in extracted
    assert "Spanish" in extracted
    assert "The customer wrote on case %(reference)s." in extracted  # a blocktranslate


def _translated_by_django(msgid: str) -> bool:
    """A string of Django's own (an admin template we override keeps "Django site admin"):
    translated by the catalogues of Django and the installed apps."""
    context, _separator, message = msgid.rpartition(CONTEXT_SEPARATOR)
    for language in ("en", "es"):
        with translation.override(language):
            shown = (
                translation.pgettext(context, message) if context else translation.gettext(message)
            )
        if shown != message:
            return True
    return False


def test_every_string_marked_for_translation_is_translated(extracted, catalogues):
    """A msgid is translated in locale/en (a Spanish source string) or in locale/es (an
    English one); one in neither would reach every customer or staff member as written."""
    missing = sorted(
        f"{where}: {msgid!r}"
        for msgid, where in extracted.items()
        if msgid not in catalogues["en"]
        and msgid not in catalogues["es"]
        and not _translated_by_django(msgid)
    )
    assert not missing, "untranslated msgids:\n" + "\n".join(missing)


@pytest.mark.parametrize("language", ["en", "es"])
def test_the_compiled_catalogue_is_the_current_one(language, catalogues):
    """The committed .mo is what the runtime reads: it must hold what the .po says."""
    with (LOCALE / language / "LC_MESSAGES" / "django.mo").open("rb") as handle:
        committed = gettext.GNUTranslations(handle)._catalog
    committed = {key[0] if isinstance(key, tuple) else key: text for key, text in committed.items()}
    assert committed == catalogues[language]
