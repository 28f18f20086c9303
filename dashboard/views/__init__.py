"""rankgym.dashboard.views: the page scripts Streamlit runs (see ``app.py``); not for import."""
