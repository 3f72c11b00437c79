"""Rules about where the time went: database time against user response time, incidents in time."""
