"""Typed configuration: named profiles (cpu, paper), the e-mail experiment profile and YAML section helpers."""

from __future__ import annotations

from toolkit.config.profiles import (PROFILE_DIR, Profile, check_keys, load_profile, typed_section)
from toolkit.config.email import (EmailProfile, ExtractionConfig)

__all__ = ['EmailProfile', 'ExtractionConfig', 'PROFILE_DIR', 'Profile', 'check_keys', 'load_profile', 'typed_section']
