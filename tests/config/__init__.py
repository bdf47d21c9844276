"""Tests of the project wiring that operators see: metrics, logs, error reports."""
