"""rankgym dashboard: the Streamlit entry point.

Run it with ``rankgym dashboard --store PATH`` (or ``streamlit run app.py -- --store PATH``,
or with ``RANKGYM_STORE=PATH``). The store is opened read-only for each script run; the only
write is a human ranking submitted on the Blind ranking page.

What it does not do: no authentication. It binds to 127.0.0.1 by default; anyone who can reach
the port can read every trajectory and add labels under any name.
"""

from __future__ import annotations

import streamlit as st

from rankgym.dashboard import data
from rankgym.dashboard.render import md_escape, show_error
from rankgym.store import Store, StoreError

# An emoji icon: Streamlit fetches ":material/..." page icons from fonts.gstatic.com, and the
# dashboard loads nothing from the internet (the Material Symbols font itself is bundled).
st.set_page_config(page_title="rankgym", page_icon="📊", layout="wide")

PAGES = [
    st.Page("views/runs.py", title="Runs", icon=":material/monitoring:", default=True),
    st.Page("views/groups.py", title="Groups", icon=":material/view_column:"),
    st.Page("views/label.py", title="Blind ranking", icon=":material/how_to_vote:"),
    st.Page("views/agreement.py", title="Agreement", icon=":material/handshake:"),
    st.Page("views/hacks.py", title="Hack suspects", icon=":material/bug_report:"),
]

page = st.navigation(PAGES)
path = data.store_path()
if path is None:
    st.error(
        "No store given. Start the dashboard with `rankgym dashboard --store PATH` "
        "or set RANKGYM_STORE=PATH."
    )
    st.stop()
try:
    store = Store(path, readonly=True)
except StoreError as e:
    show_error(e)
    st.stop()
with data.serving(store):
    st.sidebar.caption(f"store · {md_escape(path, 120)}")
    page.run()
