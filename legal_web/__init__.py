"""legal_web: the policy/regulation Q&A web app, a thin adapter on ragcore.

It depends on ragcore only (never on memory_agent) and doubles as the regression anchor of the
retrieval core: its labelled questions must keep scoring what they score today.
"""
