"""Protocol adapters over the library: servers and SDK providers."""
