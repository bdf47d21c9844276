"""English dates and times, the one shape every page, message and form widget uses (core.l10n):
"2026-12-05", "2026-12-05 22:54", "22:54" (ISO order and a 24-hour clock, which no English
reader misreads, and the exports' too)."""

DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
MONTH_DAY_FORMAT = "F j"
YEAR_MONTH_FORMAT = "F Y"
FIRST_DAY_OF_WEEK = 1  # Monday
# The first of each is how a form widget writes its value.
DATE_INPUT_FORMATS = ["%Y-%m-%d", "%d/%m/%Y", "%d %b %Y", "%d %B %Y"]
TIME_INPUT_FORMATS = ["%H:%M", "%H:%M:%S", "%H:%M:%S.%f"]
DATETIME_INPUT_FORMATS = [
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M:%S.%f",
    "%d/%m/%Y %H:%M",
    "%d/%m/%Y %H:%M:%S",
]
DECIMAL_SEPARATOR = "."
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
