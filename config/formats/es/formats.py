"""Spanish dates and times, the one shape every page, message and form widget uses (core.l10n):
"05/12/2026", "05/12/2026 22:54", "22:54". Django's own Spanish formats would write the same
date as "5 de diciembre de 2026" in one place and "05/12/2026" in another, and a time widget
as "10:00:00"."""

DATE_FORMAT = "d/m/Y"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "d/m/Y H:i"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
MONTH_DAY_FORMAT = "j \\d\\e F"
YEAR_MONTH_FORMAT = "F \\d\\e Y"
FIRST_DAY_OF_WEEK = 1  # Monday
# The first of each is how a form widget writes its value.
DATE_INPUT_FORMATS = ["%d/%m/%Y", "%d/%m/%y", "%Y-%m-%d"]
TIME_INPUT_FORMATS = ["%H:%M", "%H:%M:%S", "%H:%M:%S.%f"]
DATETIME_INPUT_FORMATS = [
    "%d/%m/%Y %H:%M",
    "%d/%m/%Y %H:%M:%S",
    "%d/%m/%Y %H:%M:%S.%f",
    "%d/%m/%y %H:%M",
    "%d/%m/%y %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
]
DECIMAL_SEPARATOR = ","
THOUSAND_SEPARATOR = "."
NUMBER_GROUPING = 3
