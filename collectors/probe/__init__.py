"""The load probe: an instrument in its own process that sends requests and reports what it saw."""
