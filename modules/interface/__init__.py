"""The interface a transport implements: the Transport class and what it is handed (its
settings, its options, the message and the destination), what it hands back (feedback,
outages, errors), and the roles and capabilities it is asked about. Nothing here knows a
driver; every driver imports from here."""
