"""mailmortem: tell apart the causes of duplicate outreach and list who was hit."""

__version__ = "0.1.0"
