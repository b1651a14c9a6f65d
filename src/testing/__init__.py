"""Test suites shipped with the package, for adapters written outside it (pytest needed).

The product never imports this package.
"""
