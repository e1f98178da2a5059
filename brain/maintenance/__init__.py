"""Maintenance: decay, archive, reclamation jobs and portable export/import."""
