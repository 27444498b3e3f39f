"""The SQL of the SQLite store (`store.py`): its tables, and the statements a budget's
reservation and settlement run on every call."""

from __future__ import annotations

from . import windows as rate

__all__ = ["ACCOUNT", "CHARGE", "HOLD", "SCHEMA"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS budget (
  name TEXT PRIMARY KEY, spent INTEGER NOT NULL DEFAULT 0, reserved INTEGER NOT NULL DEFAULT 0,
  calls INTEGER NOT NULL DEFAULT 0, unmeasured INTEGER NOT NULL DEFAULT 0,
  unbounded INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS budget_holds (
  name TEXT NOT NULL, hold TEXT NOT NULL, amount INTEGER NOT NULL, expires REAL NOT NULL,
  PRIMARY KEY (name, hold)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS budget_done (
  name TEXT NOT NULL, hold TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (name, hold));
CREATE TABLE IF NOT EXISTS budget_caps (scope TEXT PRIMARY KEY, cap TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (name TEXT PRIMARY KEY, until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS health (route TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
  response TEXT PRIMARY KEY, route TEXT NOT NULL, on_device INTEGER NOT NULL, until REAL NOT NULL);
""" + rate.SCHEMA

# An account as a reservation reads it, in one statement: `hold` held already (a replay),
# settled or released (too late), and what it has spent and holds.
ACCOUNT = (
    "SELECT EXISTS (SELECT 1 FROM budget_holds WHERE name = ?1 AND hold = ?2), "
    "EXISTS (SELECT 1 FROM budget_done WHERE name = ?1 AND hold = ?2), "
    "coalesce((SELECT spent + reserved FROM budget WHERE name = ?1), 0)"
)
HOLD = (
    "INSERT INTO budget (name, reserved) VALUES (?, ?) "
    "ON CONFLICT (name) DO UPDATE SET reserved = reserved + excluded.reserved"
)
CHARGE = (
    "INSERT INTO budget (name, spent, calls, unmeasured, unbounded, reserved) VALUES (?, ?, 1, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET spent = spent + excluded.spent, calls = calls + 1, "
    "unmeasured = unmeasured + excluded.unmeasured, unbounded = unbounded + excluded.unbounded, "
    "reserved = reserved + excluded.reserved"
)
