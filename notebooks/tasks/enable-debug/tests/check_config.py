"""The verifier's check: debug is on and the other settings are unchanged (config.toml's key = value lines)."""

settings = {}
with open("config.toml", encoding="utf-8") as handle:
    for line in handle:
        if "=" in line:
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
expected = {"name": '"demo-service"', "port": "8080", "debug": "true"}
assert settings == expected, f"config.toml has {settings}, expected {expected}"
print("config is right")
