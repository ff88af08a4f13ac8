"""Query planning and the filter language."""
