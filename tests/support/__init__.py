"""Shared helpers of the test suite: fake commands, file trees, recorders, generated hosts
and bundles. Test modules import helpers from here, never from one another."""
