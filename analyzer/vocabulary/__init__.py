"""The words every stage shares: database process names, engine dialects, metric families.

Parsers, derive and rules import these definitions instead of keeping their own copies; a use that needs
fewer names takes a named subset defined here, so the lists cannot drift apart. Plain data, no imports
of other ``dbdiag`` modules.
"""
