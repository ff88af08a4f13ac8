"""Test helpers shared by several test packages (stand-ins for services we do not own)."""
