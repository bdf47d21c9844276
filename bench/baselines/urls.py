"""The baselines' URLs: everything under /plain/."""

from django.urls import path

from bench.baselines.api import api

urlpatterns = [path("plain/", api.urls)]
