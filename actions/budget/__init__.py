"""The KV-cache budget in bytes: the maths, its inputs (config.json, sizings, a live replica), its report."""
