"""HTTP routes of the service beyond CDS Hooks (runs, resume)."""
