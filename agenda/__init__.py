"""Agenda: services, professionals, schedules, availability and appointments."""
