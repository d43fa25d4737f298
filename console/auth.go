package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/internal/accounts"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/store"
)

// signedOutForm is what the sign-in and sign-up pages show.
type signedOutForm struct {
	Email string
	Next  string
}

// formCSRF gives a signed-out form its double-submit token: the same random value in a cookie and a hidden field.
func (c *Console) formCSRF(ec echo.Context) string {
	if ck, err := ec.Cookie(csrfCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	token := randomToken()
	c.setCookie(ec, csrfCookie, token, time.Hour)
	return token
}

func (c *Console) checkFormCSRF(ec echo.Context) bool {
	ck, err := ec.Cookie(csrfCookie)
	return err == nil && equalTokens(ec.FormValue(csrfField), ck.Value)
}

func (c *Console) signUpPage(ec echo.Context) error {
	return c.render(ec, http.StatusOK, "sign-up", page{Title: "Create your account", CSRF: c.formCSRF(ec),
		Data: signedOutForm{Next: ec.QueryParam("next")}})
}

func (c *Console) signInPage(ec echo.Context) error {
	p := page{Title: "Sign in", CSRF: c.formCSRF(ec), Data: signedOutForm{Next: ec.QueryParam("next")}}
	switch {
	case ec.QueryParam("expired") == "1":
		p.Notice = "Your session expired. Sign in again to continue."
	case ec.QueryParam("signed-out") == "1":
		p.Notice = "You are signed out."
	case ec.QueryParam("password-changed") == "1":
		p.Notice = "Your password was changed and every session was ended. Sign in with the new password."
	}
	return c.render(ec, http.StatusOK, "sign-in", p)
}

// formError re-renders a signed-out form with a message and what the user typed (never the password).
func (c *Console) formError(ec echo.Context, status int, name, title, msg string) error {
	return c.render(ec, status, name, page{Title: title, CSRF: c.formCSRF(ec), Error: msg,
		Data: signedOutForm{Email: ec.FormValue("email"), Next: ec.FormValue("next")}})
}

const expiredFormMessage = "This form has expired. Please try again."

func (c *Console) signUp(ec echo.Context) error {
	const name, title = "sign-up", "Create your account"
	if !c.checkFormCSRF(ec) {
		return c.formError(ec, http.StatusForbidden, name, title, expiredFormMessage)
	}
	email := strings.TrimSpace(ec.FormValue("email"))
	password := ec.FormValue("password")
	if err := accounts.CheckSignUp(email, password); err != nil {
		return c.formError(ec, http.StatusUnprocessableEntity, name, title, err.Error())
	}
	// Only well-formed sign-ups count, so a typo does not lock out an office behind one address.
	if d := c.attempts.Take("signup:"+ec.RealIP(), signUpPolicy, time.Now()); !d.Allowed {
		return c.formError(ec, http.StatusTooManyRequests, name, title,
			"Too many accounts were created from your network. Try again in "+minutes(d.RetryAfter)+".")
	}
	u, err := c.accounts.SignUp(ec.Request().Context(), email, password)
	if errors.Is(err, accounts.ErrEmailTaken) {
		return c.formError(ec, http.StatusConflict, name, title, err.Error())
	}
	if err != nil {
		return err
	}
	c.log.Info("console sign-up", "user_id", u.ID)
	return c.startSession(ec, u, localPath(ec.FormValue("next"), "/user/workspaces"))
}

func (c *Console) signIn(ec echo.Context) error {
	const name, title = "sign-in", "Sign in"
	if !c.checkFormCSRF(ec) {
		return c.formError(ec, http.StatusForbidden, name, title, expiredFormMessage)
	}
	email := store.NormalizeEmail(ec.FormValue("email"))
	now := time.Now()
	// Failures count per account and address (a guesser locks only itself out: the owner signs in from elsewhere),
	// per address (one network guessing many accounts), and per account across every address; that last ceiling
	// slows the answers down instead of refusing, so that a distributed guesser gains little and cannot lock the
	// owner out.
	ip := ec.RealIP()
	pairKey, addressKey, accountKey := "account:"+email+"|"+ip, "address:"+ip, "account:"+email
	for _, check := range []struct {
		key    string
		policy ratelimit.Policy
		msg    string
	}{
		{pairKey, accountPolicy, "Too many failed sign-ins for this account from your network."},
		{addressKey, addressPolicy, "Too many failed sign-ins from your network."},
	} {
		// Spend before checking the password, so that concurrent guesses cannot all pass a peek; a success refunds.
		if d := c.attempts.Take(check.key, check.policy, now); !d.Allowed {
			if check.key == addressKey {
				c.attempts.Refund(pairKey, accountPolicy)
			}
			return c.formError(ec, http.StatusTooManyRequests, name, title, check.msg+" Try again in "+minutes(d.RetryAfter)+".")
		}
	}
	if d := c.attempts.Take(accountKey, accountCeiling, now); !d.Allowed {
		select {
		case <-time.After(ceilingDelay):
		case <-ec.Request().Context().Done():
			return ec.Request().Context().Err()
		}
	}
	u, err := c.accounts.Authenticate(ec.Request().Context(), email, ec.FormValue("password"))
	if errors.Is(err, accounts.ErrWrongCredentials) {
		return c.formError(ec, http.StatusUnauthorized, name, title, err.Error())
	}
	if err != nil {
		return err
	}
	c.attempts.Refund(pairKey, accountPolicy)
	c.attempts.Refund(addressKey, addressPolicy)
	c.attempts.Refund(accountKey, accountCeiling)
	return c.startSession(ec, u, ec.FormValue("next"))
}

func minutes(d time.Duration) string {
	m := int(math.Ceil(d.Minutes()))
	if m <= 1 {
		return "a minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

func (c *Console) signOut(ec echo.Context) error {
	ses := sessionFrom(ec)
	if err := c.accounts.EndSession(ec.Request().Context(), ses.ID); err != nil {
		return err
	}
	c.setCookie(ec, sessionCookie, "", -1)
	return ec.Redirect(http.StatusSeeOther, "/user/sign-in?signed-out=1")
}

func (c *Console) accountPage(ec echo.Context) error {
	return c.render(ec, http.StatusOK, "account", page{Title: "Account", Session: sessionFrom(ec)})
}

// changePassword checks the current password, stores the new one and ends every session — this one too, so the
// user signs in again with the new password everywhere.
func (c *Console) changePassword(ec echo.Context) error {
	ses := sessionFrom(ec)
	ctx := ec.Request().Context()
	fail := func(status int, msg string) error {
		return c.render(ec, status, "account", page{Title: "Account", Session: ses, Error: msg})
	}
	limitKey := "password:" + ses.UserID
	if d := c.attempts.Take(limitKey, accountPolicy, time.Now()); !d.Allowed {
		return fail(http.StatusTooManyRequests, "Too many wrong passwords. Try again in "+minutes(d.RetryAfter)+".")
	}
	err := c.accounts.ChangePassword(ctx, ses.UserID, ec.FormValue("current_password"), ec.FormValue("new_password"))
	var refused *accounts.Error
	switch {
	case errors.Is(err, accounts.ErrWrongPassword):
		return fail(http.StatusUnauthorized, err.Error())
	case errors.As(err, &refused):
		c.attempts.Refund(limitKey, accountPolicy)
		return fail(http.StatusUnprocessableEntity, err.Error())
	case err != nil:
		return err
	}
	c.attempts.Refund(limitKey, accountPolicy)
	c.setCookie(ec, sessionCookie, "", -1)
	return ec.Redirect(http.StatusSeeOther, "/user/sign-in?password-changed=1")
}
