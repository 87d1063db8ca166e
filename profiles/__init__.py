"""The profiles shipped with harness, installed as package data (`harness profiles list`)."""
