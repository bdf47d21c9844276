"""The public availability API of agenda: exactly the names imported from outside the app."""

from agenda.availability.dates import SearchWindow, search_window
from agenda.availability.local_time import describe_instant
from agenda.availability.search import slots_available
from agenda.availability.slots import Slot

__all__ = ["SearchWindow", "Slot", "describe_instant", "search_window", "slots_available"]
