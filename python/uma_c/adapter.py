"""What both framework adapters expose about their allocator, written once."""


def allocator_functions(allocator):
    """stats, stats_json, quota, set_quota and trim over `allocator()` (the adapter's installed
    uma_c.Allocator; it raises the adapter's InstallError before install())."""

    def stats():
        """uma's counters (uma_stats) as a dict."""
        return allocator().stats()

    def stats_json():
        """uma's counters as the JSON of `uma stats --json`."""
        return allocator().stats_json()

    def quota():
        """The quota in bytes."""
        return allocator().quota()

    def set_quota(quota_bytes):
        """Changes the quota; refused below what uma holds now."""
        allocator().set_quota(quota_bytes)

    def trim():
        """Gives idle cached memory back to the allocator and the backend (uma_trim); returns
        the bytes of the block allocator's slabs given back."""
        return allocator().trim()

    return stats, stats_json, quota, set_quota, trim
